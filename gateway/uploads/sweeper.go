package uploads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/platform/periodic"
	"github.com/modelgate/modelgate/gateway/store"
)

// Records are the upload records the sweeper reads and deletes;
// *store.Store is one.
type Records interface {
	ListExpiredUploads(ctx context.Context, now time.Time, limit int) ([]store.Upload, error)
	DeleteUpload(ctx context.Context, userID int64, id string) error
	ExtendUpload(ctx context.Context, userID int64, id string, until time.Time) error
}

// InUse reports whether a live (unfinished) task references an upload.
type InUse func(ctx context.Context, u store.Upload) (bool, error)

// Deleter removes blobs; *blob.Store is one. Deleting a missing key is not
// an error.
type Deleter interface {
	Delete(ctx context.Context, key string) error
}

// Sweeper deletes expired uploads: the blob first, then the record, so a
// crash in between leaves a record the next sweep retries, never an orphan
// blob. It runs on every replica (deletes are idempotent).
type Sweeper struct {
	Records Records
	Blobs   Deleter
	Clock   clock.WithTicker
	// Interval between sweeps; default 10 minutes.
	Interval time.Duration
	// Batch is how many records one query reads; default 500.
	Batch int
	// InUse, when set, spares uploads a live task references: their expiry
	// moves one interval on and the next sweep asks again, so a file is
	// never deleted under a task that will still read it.
	InUse InUse
}

// NewSweeper returns a sweeper on c, or the real clock when c cannot tick.
func NewSweeper(records Records, blobs Deleter, c clock.PassiveClock) *Sweeper {
	return &Sweeper{Records: records, Blobs: blobs, Clock: periodic.Ticking(c)}
}

func (s *Sweeper) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return 10 * time.Minute
}

func (s *Sweeper) batch() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return 500
}

// Sweep deletes every upload expired at the clock's now and returns how
// many it deleted. It goes on past a failed deletion and reports the
// failures together.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.Clock.Now()
	deleted := 0
	var errs []error
	for {
		list, err := s.Records.ListExpiredUploads(ctx, now, s.batch())
		if err != nil {
			return deleted, err
		}
		progress := false
		for _, u := range list {
			if kept, err := s.keepInUse(ctx, u, now); err != nil || kept {
				if err != nil {
					errs = append(errs, err)
				} else {
					progress = true // it left the expired window
				}
				continue
			}
			if err := s.Blobs.Delete(ctx, u.BlobKey); err != nil {
				errs = append(errs, fmt.Errorf("upload %s: %w", u.ID, err))
				continue
			}
			if err := s.Records.DeleteUpload(ctx, u.UserID, u.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			deleted++
			progress = true
		}
		// A short batch is the last; a batch that deleted nothing would
		// be read again, so stop and let the next sweep retry.
		if len(list) < s.batch() || !progress {
			return deleted, errors.Join(errs...)
		}
	}
}

// keepInUse extends an upload a live task references instead of deleting it.
func (s *Sweeper) keepInUse(ctx context.Context, u store.Upload, now time.Time) (bool, error) {
	if s.InUse == nil {
		return false, nil
	}
	used, err := s.InUse(ctx, u)
	if err != nil || !used {
		return false, err
	}
	if err := s.Records.ExtendUpload(ctx, u.UserID, u.ID, now.Add(s.interval())); err != nil {
		return false, fmt.Errorf("upload %s: %w", u.ID, err)
	}
	return true, nil
}

// Start sweeps at once and then every Interval until ctx is done. It is a
// controller-runtime Runnable.
func (s *Sweeper) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("upload-sweeper")
	periodic.Run(ctx, s.Clock, s.interval(), func(ctx context.Context) {
		if n, err := s.Sweep(ctx); err != nil {
			logger.Error(err, "sweep expired uploads", "deleted", n)
		} else if n > 0 {
			logger.V(1).Info("swept expired uploads", "deleted", n)
		}
	})
	return nil
}

// NeedLeaderElection is false: every replica sweeps.
func (s *Sweeper) NeedLeaderElection() bool { return false }
