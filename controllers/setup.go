package controllers

import (
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/modelgate/modelgate/gateway/blob"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/tasks"
)

// Options configure every reconciler.
type Options struct {
	Ledger Ledger
	Clock  clock.PassiveClock
	// SyncPeriod bounds how often ledger figures are mirrored into status.
	SyncPeriod time.Duration
	// KnownProvider reports whether a provider adapter exists (nil: any).
	KnownProvider func(name string) bool
	// Blobs receives generated media (GenerationTask controller).
	Blobs *blob.Store
	// TaskRetention keeps final GenerationTask objects this long; default 1h.
	TaskRetention time.Duration
	// ReviewDeadline bounds one private asset review round; default 20 min.
	ReviewDeadline time.Duration
	// ReviewAssetRetention keeps reviewed private assets reusable this long
	// without use; default 60 days.
	ReviewAssetRetention time.Duration
	// Housekeeping sets the intervals of the lease sweeper and the
	// stale-reservation refunder (zero fields: the housekeeping defaults).
	Housekeeping housekeeping.Keeper
}

// Setup registers every reconciler with the manager. Indexes are registered
// separately (index.AddIndexes) because the gateway needs them too.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if err := (&TenantReconciler{Client: mgr.GetClient(), Ledger: o.Ledger, Clock: o.Clock,
		BalanceSyncPeriod: o.SyncPeriod}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ApiTokenReconciler{Client: mgr.GetClient(), Ledger: o.Ledger, Clock: o.Clock,
		UsageSyncPeriod: o.SyncPeriod}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ModelRouteReconciler{Client: mgr.GetClient(), KnownProvider: o.KnownProvider}).SetupWithManager(mgr); err != nil {
		return err
	}
	if tl, ok := o.Ledger.(TaskLedger); ok {
		if err := (&GenerationTaskReconciler{Client: mgr.GetClient(), Ledger: tl, Blobs: o.Blobs, Clock: o.Clock,
			Retention: o.TaskRetention, ReviewDeadline: o.ReviewDeadline}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if rr, ok := o.Ledger.(tasks.ReviewRecords); ok {
		var blobs tasks.BlobDeleter
		if o.Blobs != nil { // not a typed nil in the interface
			blobs = o.Blobs
		}
		if err := mgr.Add(tasks.NewReviewSweeper(rr, blobs, o.Clock, o.ReviewAssetRetention)); err != nil {
			return err
		}
	}
	if hl, ok := o.Ledger.(housekeeping.Ledger); ok {
		k := housekeeping.New(hl, o.Clock)
		k.LeaseSweepInterval = o.Housekeeping.LeaseSweepInterval
		k.StaleRefundInterval = o.Housekeeping.StaleRefundInterval
		k.StaleAge = o.Housekeeping.StaleAge
		if err := mgr.Add(k); err != nil {
			return err
		}
	}
	return (&PriceRuleReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
}
