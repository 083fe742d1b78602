package tasks

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/platform/periodic"
	"github.com/modelgate/modelgate/gateway/store"
)

// DefaultReviewAssetRetention is how long a reviewed asset stays reusable
// without use: the review's records are cleaned up after 60 days unused.
const DefaultReviewAssetRetention = 60 * 24 * time.Hour

// ReviewRecords are the review records the sweeper reads and deletes;
// *store.Store is one.
type ReviewRecords interface {
	UnusedReviewAssets(ctx context.Context, before time.Time, limit int) ([]store.ReviewAsset, error)
	DeleteReviewAsset(ctx context.Context, a store.ReviewAsset, before time.Time) (bool, error)
	ReviewBlobInUse(ctx context.Context, blobKey string) (bool, error)
}

// BlobDeleter removes stored copies; *blob.Store is one.
type BlobDeleter interface {
	Delete(ctx context.Context, key string) error
}

// ReviewSweeper deletes review records unused for Retention, and the stored
// copy of an inline asset once no record names it. The record goes first:
// a task that used it meanwhile keeps it (the delete is conditional), and a
// copy deleted under a later submission is written again by that
// submission. Cleaned assets are prepared again on later requests.
type ReviewSweeper struct {
	Records ReviewRecords
	Blobs   BlobDeleter // nil: records only
	Clock   clock.WithTicker
	// Retention defaults to DefaultReviewAssetRetention; Interval to 1 h.
	Retention time.Duration
	Interval  time.Duration
}

// NewReviewSweeper returns a sweeper on c, or the real clock when c cannot tick.
func NewReviewSweeper(records ReviewRecords, blobs BlobDeleter, c clock.PassiveClock, retention time.Duration) *ReviewSweeper {
	return &ReviewSweeper{Records: records, Blobs: blobs, Clock: periodic.Ticking(c), Retention: retention}
}

// Sweep deletes what is due at the clock's now and reports how many records went.
func (s *ReviewSweeper) Sweep(ctx context.Context) (int, error) {
	retention := s.Retention
	if retention <= 0 {
		retention = DefaultReviewAssetRetention
	}
	cut := s.Clock.Now().Add(-retention)
	const batch = 500
	deleted := 0
	var errs []error
	for {
		list, err := s.Records.UnusedReviewAssets(ctx, cut, batch)
		if err != nil {
			return deleted, err
		}
		progress := false
		for _, a := range list {
			gone, err := s.Records.DeleteReviewAsset(ctx, a, cut)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !gone {
				continue
			}
			deleted, progress = deleted+1, true
			if err := s.dropCopy(ctx, a.BlobKey); err != nil {
				errs = append(errs, err)
			}
		}
		if len(list) < batch || !progress {
			return deleted, errors.Join(errs...)
		}
	}
}

func (s *ReviewSweeper) dropCopy(ctx context.Context, key string) error {
	if key == "" || s.Blobs == nil {
		return nil
	}
	if used, err := s.Records.ReviewBlobInUse(ctx, key); err != nil || used {
		return err
	}
	return s.Blobs.Delete(ctx, key)
}

// Start sweeps at once and then every Interval until ctx is done (a
// controller-runtime Runnable; it runs on the leader only).
func (s *ReviewSweeper) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("review-asset-sweeper")
	interval := s.Interval
	if interval <= 0 {
		interval = time.Hour
	}
	periodic.Run(ctx, s.Clock, interval, func(ctx context.Context) {
		if n, err := s.Sweep(ctx); err != nil {
			logger.Error(err, "sweep unused review assets", "deleted", n)
		} else if n > 0 {
			logger.Info("swept unused review assets", "deleted", n)
		}
	})
	return nil
}
