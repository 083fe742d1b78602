package generationtask

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// AssetCopier stores a copy of a review asset fetched from its URL; a
// *assetcopy.Refusal is the asset's fault (the task fails, no fee).
type AssetCopier interface {
	Copy(ctx context.Context, typ, rawURL, keyBase string) (uploads.Object, error)
}

// review runs private asset review before generation: one round per backend
// (a backend switch starts a new round with a new deadline), every selected
// asset must pass, and a rejection or the deadline fails the task before any
// video is submitted, refunding the reservation (no generation fee). passed
// reports that generation may start.
//
// Each asset is prepared through the ledger's reusable record for (tenant,
// channel, asset): a record that passed before is reused at once, and tasks
// that need the same asset meanwhile share one preparation. The channel's
// review service decides pending records (reviewer); a channel
// without a private asset library skips review.
func (p *pass) review(ctx context.Context, j *job) (passed bool, res ctrl.Result, err error) {
	svc := p.reviewer(j.backend)
	if svc == nil {
		return true, ctrl.Result{}, nil
	}
	round, err := p.openRound(ctx, j)
	if round == nil || err != nil {
		return false, ctrl.Result{}, err
	}
	if round.Outcome == v1.ReviewPassed {
		return true, ctrl.Result{}, nil
	}
	channel := tasks.ReviewChannel(j.route.Namespace, j.route.Name, j.backend.Name)
	wait, all := maxPoll, true
	for i := range round.Assets {
		a := &round.Assets[i]
		prep, err := p.prepareAsset(ctx, j, svc, store.ReviewAsset{UserID: j.t.Spec.UserID, Channel: channel,
			Type: a.Type, Key: a.URL, BlobKey: blobKeyOf(j.sub, a.URL)})
		if err != nil {
			return false, ctrl.Result{}, err
		}
		a.State = prep.state
		if prep.refusal != "" {
			round.Outcome = v1.ReviewRejected
			return false, ctrl.Result{}, p.fail(ctx, j.t,
				fmt.Sprintf("private asset review could not use the %s asset %s: %s; no video generation fee is charged", a.Type, a.URL, prep.refusal))
		}
		a.Copy, a.UpstreamRef = prep.copyKey, prep.ref
		if prep.state == v1.ReviewRejected {
			round.Outcome = v1.ReviewRejected
			return false, ctrl.Result{}, p.fail(ctx, j.t,
				fmt.Sprintf("private asset review rejected the %s asset %s; no video generation fee is charged", a.Type, a.URL))
		}
		if prep.state != v1.ReviewPassed {
			all, wait = false, min(wait, prep.wait)
		}
	}
	if msg, err := p.referenceTotals(ctx, round, j.sub); err != nil || msg != "" {
		if err != nil {
			return false, ctrl.Result{}, err
		}
		round.Outcome = v1.ReviewRejected
		return false, ctrl.Result{}, p.fail(ctx, j.t, msg+"; no video generation fee is charged")
	}
	if all {
		round.Outcome = v1.ReviewPassed
		return true, ctrl.Result{}, nil
	}
	if !p.now.Before(round.Deadline.Time) {
		round.Outcome = v1.ReviewExpired
		return false, ctrl.Result{}, p.fail(ctx, j.t,
			"private asset review did not finish before the round's deadline; no video generation fee is charged")
	}
	return false, ctrl.Result{RequeueAfter: roundUp(min(wait, round.Deadline.Sub(p.now)))}, nil
}

// openRound returns the review round of the job's backend, opening it
// (with its deadline) on the first look; nil when the task failed for
// having too many rounds.
func (p *pass) openRound(ctx context.Context, j *job) (*v1.ReviewRound, error) {
	st := &j.t.Status
	if n := len(st.ReviewRounds); n > 0 && st.ReviewRounds[n-1].Backend == j.backend.Name {
		return &st.ReviewRounds[n-1], nil
	}
	if len(st.ReviewRounds) >= 16 {
		return nil, p.fail(ctx, j.t, "private asset review: too many review rounds")
	}
	deadline := p.ReviewDeadline
	if deadline <= 0 {
		deadline = DefaultReviewDeadline
	}
	rr := v1.ReviewRound{Round: int32(len(st.ReviewRounds) + 1), Backend: j.backend.Name,
		Deadline: metav1.NewTime(p.now.Add(deadline)), Outcome: v1.ReviewPending}
	for _, a := range j.sub.ReviewAssets {
		rr.Assets = append(rr.Assets, v1.ReviewAsset{URL: a.URL, Type: a.Type, Role: a.Role, State: v1.ReviewPending})
	}
	st.ReviewRounds = append(st.ReviewRounds, rr)
	return &st.ReviewRounds[len(st.ReviewRounds)-1], nil
}

// preparation is where one asset's review stands: its state, when to look
// again while pending, why it cannot be used (refusal: the task fails), the
// key of its stored copy and the channel library's reference of it.
type preparation struct {
	state   string
	wait    time.Duration
	refusal string
	copyKey string
	ref     string
}

// prepared is the preparation of a record as stored.
func prepared(rec store.ReviewAsset) preparation {
	return preparation{state: rec.State, copyKey: rec.BlobKey, ref: rec.UpstreamRef}
}

// prepareAsset looks up or starts the asset's shared preparation, copies a
// URL asset into the blob store while it has no copy (under private asset
// review a URL asset is stored on demand and its bytes are checked, not the
// URL), and asks the review service to decide it while pending.
func (p *pass) prepareAsset(ctx context.Context, j *job, svc upstream.AssetReviewer, a store.ReviewAsset) (preparation, error) {
	rec, err := p.Ledger.PrepareReviewAsset(ctx, a, p.now)
	if err != nil {
		return preparation{}, fmt.Errorf("prepare review asset: %w", err)
	}
	// Copied in any state: a record decided before copies were made gets
	// one too, since the upstream receives the copy, not the URL.
	if rec.BlobKey == "" && !strings.HasPrefix(rec.Key, media.InlineKeyPrefix) {
		obj, err := p.copier().Copy(ctx, rec.Type, rec.Key, assetcopy.Key(j.t.Namespace, rec.Type, rec.Key))
		if ref, ok := errors.AsType[*assetcopy.Refusal](err); ok {
			// Not recorded as a decision: the URL may serve a usable file
			// later, and the next request prepares it again.
			return preparation{state: store.ReviewRejected, refusal: ref.Message}, nil
		}
		if err != nil {
			return preparation{}, fmt.Errorf("copy review asset: %w", err)
		}
		rec.BlobKey = obj.Key
		if rec, err = p.Ledger.PrepareReviewAsset(ctx, rec, p.now); err != nil {
			return preparation{}, fmt.Errorf("record review asset copy: %w", err)
		}
	}
	if rec.State != store.ReviewPending {
		return prepared(rec), nil
	}
	d, err := p.decide(ctx, j, svc, rec)
	if err != nil {
		log.FromContext(ctx).Error(err, "asset review service", "backend", j.backend.Name)
		out := prepared(rec)
		out.wait = minPoll * 4
		return out, nil
	}
	if d.State == store.ReviewPending {
		if d.Ref != "" && d.Ref != rec.UpstreamRef {
			if rec, err = p.Ledger.RecordReviewRef(ctx, rec, d.Ref); err != nil {
				return preparation{}, fmt.Errorf("record review reference: %w", err)
			}
		}
		out := prepared(rec)
		out.state, out.wait = store.ReviewPending, max(d.Wait, minPoll)
		return out, nil
	}
	if d.Ref != "" {
		rec.UpstreamRef = d.Ref
	}
	if rec, err = p.Ledger.DecideReviewAsset(ctx, rec, d.State, p.now); err != nil {
		return preparation{}, fmt.Errorf("record review decision: %w", err)
	}
	return prepared(rec), nil
}

// decide asks the review service about a pending record, with the
// backend's credential and a signed link to the record's copy (a library
// that keeps its own copy fetches it from there: the upstream never
// receives the tenant's URL).
func (p *pass) decide(ctx context.Context, j *job, svc upstream.AssetReviewer, rec store.ReviewAsset) (upstream.ReviewDecision, error) {
	b, err := p.resolved(ctx, j)
	if err != nil {
		return upstream.ReviewDecision{}, err
	}
	a := upstream.ReviewAsset{Type: rec.Type, Key: rec.Key, PreparedAt: rec.PreparedAt, Ref: rec.UpstreamRef}
	if rec.BlobKey != "" && p.Blobs != nil {
		if a.CopyURL, err = p.Blobs.SignedURL(ctx, rec.BlobKey, ResultValidity); err != nil {
			return upstream.ReviewDecision{}, fmt.Errorf("sign review asset copy: %w", err)
		}
	}
	return svc.Decide(ctx, b, a, p.now)
}

// reviewFields name the request field of each reviewed media type.
var reviewFields = map[string]string{"video": "video_with_roles", "audio": "audio_with_roles"}

// referenceTotals applies the model's limit of 15 seconds in total to the
// reference videos and to the reviewed audio, with the reviewed assets'
// durations read from their stored copies' headers (what a client declares
// is not trusted; video_list, outside review, counts as the gateway counted
// it). It answers the refusal message, or "" while within the limit or
// while a copy is still missing (an asset stored before copies were made).
func (p *pass) referenceTotals(ctx context.Context, round *v1.ReviewRound, sub *tasks.Submission) (string, error) {
	if msg, err := p.probeDurations(ctx, round); err != nil || msg != "" {
		return msg, err
	}
	for _, typ := range []string{"video", "audio"} {
		var total time.Duration
		if typ == "video" {
			total = time.Duration(sub.ListVideoMillis) * time.Millisecond
		}
		for _, a := range round.Assets {
			if a.Type != typ {
				continue
			}
			if a.DurationMillis <= 0 {
				return "", nil
			}
			total += time.Duration(a.DurationMillis) * time.Millisecond
		}
		if total > media.VideoMaxRefSeconds*time.Second {
			return fmt.Sprintf("%s durations must total at most %d seconds (got %s, read from the files)",
				reviewFields[typ], media.VideoMaxRefSeconds, strconv.FormatFloat(total.Seconds(), 'f', -1, 64)+" s"), nil
		}
	}
	return "", nil
}

// probeDurations reads the duration of each video and audio copy once
// (status keeps it for pricing); a copy whose headers give none is refused.
func (p *pass) probeDurations(ctx context.Context, round *v1.ReviewRound) (string, error) {
	if p.Blobs == nil {
		return "", nil
	}
	for i := range round.Assets {
		a := &round.Assets[i]
		if (a.Type != "video" && a.Type != "audio") || a.Copy == "" || a.DurationMillis > 0 {
			continue
		}
		d, err := p.durationOf(ctx, a.Copy)
		if errors.Is(err, mediaduration.ErrUnknown) {
			return fmt.Sprintf("private asset review could not read the duration of a %s asset: %v", a.Type, err), nil
		}
		if err != nil {
			return "", err
		}
		a.DurationMillis = max(d.Milliseconds(), 1)
	}
	return "", nil
}

// durationOf probes a stored copy: only its container headers are read.
func (p *pass) durationOf(ctx context.Context, key string) (time.Duration, error) {
	rd, err := p.Blobs.Open(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("open review asset copy: %w", err)
	}
	defer func() { _ = rd.Close() }()
	return mediaduration.Of(rd, rd.Size(), rd.ContentType())
}

func (r *Reconciler) copier() AssetCopier {
	if r.Copier != nil {
		return r.Copier
	}
	if r.Blobs == nil {
		return noCopier{}
	}
	return &assetcopy.Copier{Blobs: r.Blobs, Own: r.Blobs}
}

// noCopier fails every copy: without a blob store a URL asset cannot be
// prepared, which is the platform's fault (retried), not the client's.
type noCopier struct{}

func (noCopier) Copy(context.Context, string, string, string) (uploads.Object, error) {
	return uploads.Object{}, errors.New("no blob store is configured for review asset copies")
}

// reviewer returns the review service of a channel, or nil when the channel
// has no private asset library (review is skipped and the channel's own
// media processing applies): upstream.Registry.AssetLibrary. A library the
// backend names but cannot have makes the backend not ready (the ModelRoute
// controller), so no new task is routed to it.
func (r *Reconciler) reviewer(b *v1.Backend) upstream.AssetReviewer {
	rv, _ := r.Upstreams.AssetLibrary(upstream.Backend{Name: b.Name, Provider: b.Provider, Options: b.Options})
	return rv
}

// roundUp rounds a wait up to whole seconds (status times have second
// precision) and to at least one second.
func roundUp(d time.Duration) time.Duration {
	if r := d.Truncate(time.Second); r != d || d <= 0 {
		return r + time.Second
	}
	return d
}
