package controllers

import (
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Options configure every reconciler.
type Options struct {
	Ledger Ledger
	Clock  clock.PassiveClock
	// SyncPeriod bounds how often ledger figures are mirrored into status.
	SyncPeriod time.Duration
	// KnownProvider reports whether a provider adapter exists (nil: any).
	KnownProvider func(name string) bool
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
	return (&PriceRuleReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
}
