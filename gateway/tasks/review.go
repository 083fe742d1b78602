package tasks

import (
	"context"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/store"
)

// ReviewService is a channel's private asset review: it decides one
// prepared asset. Decide returns store.ReviewPassed, store.ReviewRejected,
// or store.ReviewPending with how long to wait before asking again.
type ReviewService interface {
	Decide(ctx context.Context, b *v1.Backend, a store.ReviewAsset, now time.Time) (state string, wait time.Duration, err error)
}

// DefaultSimulatedReviewTime is how long the simulated review service takes
// to decide (backend option "reviewDelay" overrides it).
const DefaultSimulatedReviewTime = time.Second

// SimulatedReview is the built-in review service. It decides an asset once
// its preparation is "reviewDelay" old: an asset whose key (URL) contains
// "reject" is rejected, one containing "slow" is never decided (its round
// runs into the deadline), anything else passes — inline images, keyed by
// their content digest, pass.
type SimulatedReview struct{}

// Decide implements ReviewService.
func (SimulatedReview) Decide(_ context.Context, b *v1.Backend, a store.ReviewAsset, now time.Time) (string, time.Duration, error) {
	if strings.Contains(a.Key, "slow") {
		return store.ReviewPending, time.Minute, nil
	}
	if left := a.PreparedAt.Add(SimulatedReviewTime(b)).Sub(now); left > 0 {
		return store.ReviewPending, left, nil
	}
	if strings.Contains(a.Key, "reject") {
		return store.ReviewRejected, 0, nil
	}
	return store.ReviewPassed, 0, nil
}

// SimulatedReviewTime is the simulated service's decision time on b.
func SimulatedReviewTime(b *v1.Backend) time.Duration {
	if v, ok := b.Options["reviewDelay"]; ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	return DefaultSimulatedReviewTime
}

// ReviewServiceFor returns the review service of a channel, or nil when the
// channel has no private asset library (review is skipped and the channel's
// own media processing applies). Backend option "assetLibrary" names the
// service: "simulated", or "none"; the simulated provider defaults to
// "simulated", every other provider to "none".
func ReviewServiceFor(b *v1.Backend) ReviewService {
	lib, ok := b.Options["assetLibrary"]
	if !ok && b.Provider == SimulatedProvider {
		lib = "simulated"
	}
	if lib == "simulated" {
		return SimulatedReview{}
	}
	return nil
}

// ReviewChannel names a backend for review records: review is per channel.
func ReviewChannel(routeNamespace, routeName, backend string) string {
	return routeNamespace + "/" + routeName + "/" + backend
}
