// Package housekeeping gives back quota that nobody will settle: leases of
// replicas that stopped renewing them, and reservations of gateways that
// died between reserving and settling; it deletes the rate windows
// (cluster-wide rate limits) that ended; and it removes what has outlived
// its retention. It runs in the manager, on the elected leader only (one
// sweeper is enough; concurrent sweeps would be safe, only wasteful).
package housekeeping

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/platform/periodic"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/store"
)

// Defaults of the manager's flags.
const (
	// DefaultLeaseSweepInterval: a dead replica's quota is back at most one
	// lease TTL (the gateway's --lease-ttl, 10 min) plus this after its last
	// renewal.
	DefaultLeaseSweepInterval = 30 * time.Second
	// DefaultStaleRefundInterval is how often orphaned reservations are looked for.
	DefaultStaleRefundInterval = 5 * time.Minute
	// DefaultStaleAge is well above the longest text request (a stream the
	// upstream keeps open); generation tasks are exempt whatever their age.
	DefaultStaleAge = time.Hour
	// DefaultRetentionInterval: retention works in days and months; an
	// hourly pass keeps each pass small.
	DefaultRetentionInterval = time.Hour
)

// Default retentions (the manager's --retention-* flags).
const (
	day = 24 * time.Hour
	// DefaultUsageRetention keeps usage rows for 400 days: a full year of
	// invoices plus a month to dispute the last one.
	DefaultUsageRetention = 400 * day
	// DefaultResponsesRetention is the public Responses API's: stored
	// responses are kept for 30 days.
	DefaultResponsesRetention = 30 * day
	// DefaultReservationRetention keeps closed reservations a week: long
	// after any replay of their request ID (journal replays take seconds,
	// a task's settlement retries minutes).
	DefaultReservationRetention = 7 * day
	// DefaultTaskRetention matches the usage rows, so the task a usage row
	// names can be looked up as long as the row exists.
	DefaultTaskRetention = DefaultUsageRetention
)

// DefaultRetention is the retention of every table at the flags' defaults.
func DefaultRetention() store.Retention {
	return store.Retention{Usage: DefaultUsageRetention, Responses: DefaultResponsesRetention,
		Reservations: DefaultReservationRetention, Tasks: DefaultTaskRetention}
}

// Ledger is what housekeeping needs; *store.Store is one.
type Ledger interface {
	SweepExpiredLeases(ctx context.Context) (store.LeaseSweep, error)
	RefundStale(ctx context.Context, olderThan time.Duration) (store.StaleRefund, error)
	DeleteRateWindows(ctx context.Context, before time.Time) (int64, error)
	ApplyRetention(ctx context.Context, r store.Retention) (store.RetentionResult, error)
}

// Keeper runs the lease sweeper, the stale-reservation refunder and the
// retention pass. It is a controller-runtime Runnable that needs leader
// election.
type Keeper struct {
	Ledger Ledger
	Clock  clock.WithTicker
	// Zero fields take the defaults above.
	LeaseSweepInterval  time.Duration
	StaleRefundInterval time.Duration
	StaleAge            time.Duration
	RetentionInterval   time.Duration
	// Retention is used as given: a zero field keeps that table forever.
	// New sets DefaultRetention.
	Retention store.Retention
}

// New returns a Keeper ticking on c, or on the real clock when c cannot tick.
func New(l Ledger, c clock.PassiveClock) *Keeper {
	return &Keeper{Ledger: l, Clock: periodic.Ticking(c), Retention: DefaultRetention()}
}

// NeedLeaderElection makes the manager run the Keeper on the leader only.
func (k *Keeper) NeedLeaderElection() bool { return true }

// Start runs the jobs until ctx ends.
func (k *Keeper) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		periodic.Run(ctx, k.Clock, or(k.StaleRefundInterval, DefaultStaleRefundInterval), k.refundStale)
	})
	wg.Go(func() {
		periodic.Run(ctx, k.Clock, or(k.RetentionInterval, DefaultRetentionInterval), k.applyRetention)
	})
	periodic.Run(ctx, k.Clock, or(k.LeaseSweepInterval, DefaultLeaseSweepInterval), k.sweepLeases)
	wg.Wait()
	return nil
}

func (k *Keeper) applyRetention(ctx context.Context) {
	got, err := k.Ledger.ApplyRetention(ctx, k.Retention)
	var rows, parts int64
	for table, n := range got.Rows {
		metrics.RetentionRowsRemoved.WithLabelValues(table).Add(float64(n))
		rows += n
	}
	for table, n := range got.Partitions {
		metrics.RetentionPartitionsRemoved.WithLabelValues(table).Add(float64(n))
		parts += n
	}
	if err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "apply retention", "rows", rows, "partitions", parts)
		return
	}
	if rows > 0 || parts > 0 {
		log.FromContext(ctx).Info("removed expired records", "rows", got.Rows, "partitions", got.Partitions)
	}
}

func (k *Keeper) sweepLeases(ctx context.Context) {
	// A window is read while it is current; the previous one is kept for
	// replicas whose clocks are a little behind.
	before := k.Clock.Now().Truncate(ratelimit.Window).Add(-ratelimit.Window)
	if _, err := k.Ledger.DeleteRateWindows(ctx, before); err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "delete ended rate windows")
	}
	got, err := k.Ledger.SweepExpiredLeases(ctx)
	k.count(metrics.LeasesSwept, metrics.LeaseQuotaReturned, got.Leases, got.Quota)
	if err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "sweep expired leases", "released", got.Leases)
		return
	}
	if got.Leases > 0 {
		log.FromContext(ctx).Info("returned the quota of expired leases", "leases", got.Leases, "quota", int64(got.Quota))
	}
}

func (k *Keeper) refundStale(ctx context.Context) {
	got, err := k.Ledger.RefundStale(ctx, or(k.StaleAge, DefaultStaleAge))
	k.count(metrics.StaleReservationsRefunded, metrics.StaleQuotaRefunded, got.Reservations, got.Quota)
	if err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "refund stale reservations", "refunded", got.Reservations)
		return
	}
	if got.Reservations > 0 {
		log.FromContext(ctx).Info("refunded stale reservations", "reservations", got.Reservations, "quota", int64(got.Quota))
	}
}

type counter interface{ Add(float64) }

func (k *Keeper) count(items, quota counter, n int, q billing.Quota) {
	items.Add(float64(n))
	quota.Add(float64(q))
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
