package controllers

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/gateway/assetcopy"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// Options configure every reconciler.
type Options struct {
	Ledger SystemLedger
	Clock  clock.PassiveClock
	// SyncPeriod bounds how often ledger figures are mirrored into status.
	SyncPeriod time.Duration
	// MirrorWritesPerSecond bounds the mirrors' status writes across the
	// manager (0: DefaultMirrorWritesPerSecond).
	MirrorWritesPerSecond float64
	// KnownProvider reports whether a provider adapter exists (nil: any).
	KnownProvider func(name string) bool
	// Upstreams are the adapters GenerationTasks run on (builtin.Registry, built once per process by the composition root).
	Upstreams *upstream.Registry
	// Blobs receives generated media (GenerationTask controller).
	Blobs *blob.Store
	// Guard decides which addresses tenant- and client-chosen URLs may
	// reach: webhooks, review assets (nil: public addresses only).
	Guard *netguard.Guard
	// Downloads fetches the output URLs task upstreams name (the process's
	// upstream.Egress.Downloads; nil: public addresses only).
	Downloads *http.Client
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
	// Concurrency is each controller's number of concurrent reconciles
	// (zero fields: DefaultConcurrency's).
	Concurrency Concurrency
	// BatchLines runs batch lines through the gateway's data path, and
	// BatchFiles reads their input and stores their results (the
	// composition root's); without both (or without Blobs, which holds a
	// batch's progress), no Batch controller runs.
	BatchLines batch.LineRunner
	BatchFiles batch.Files
	// BatchUpstream runs batch lines as jobs of the upstreams' own batch
	// APIs where a route's backend has one (nil: every line through
	// BatchLines).
	BatchUpstream batch.Upstream
	// BatchPollInterval is how often an upstream batch job is read (zero:
	// batch.DefaultPollInterval).
	BatchPollInterval time.Duration
	// BatchPassBudget bounds how long one pass of the Batch controller
	// starts lines (zero: batch.DefaultPassBudget).
	BatchPassBudget time.Duration
	// NoBatchController leaves Batches alone (a test suite that plays the
	// controller's part by hand).
	NoBatchController bool
}

// Concurrency is the number of concurrent reconciles per controller.
type Concurrency struct {
	Tenant, ApiToken, ModelRoute, PriceRule, GenerationTask, TaskWebhook, Batch int
}

// DefaultConcurrency: one worker where reconciles are cheap and rare;
// ApiToken runs 4 (a GitOps fleet of thousands of keys waits on the ledger
// and the API server, not on CPU), GenerationTask 8 (tasks wait on
// upstreams), TaskWebhook 4 (deliveries wait on receivers) and Batch 4
// (batches at once; each runs its own spec.concurrency lines).
var DefaultConcurrency = Concurrency{Tenant: 1, ApiToken: 4, ModelRoute: 1, PriceRule: 1, GenerationTask: 8, TaskWebhook: 4, Batch: 4}

// withDefaults fills zero fields from DefaultConcurrency.
func (c Concurrency) withDefaults() Concurrency {
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	d := DefaultConcurrency
	return Concurrency{Tenant: pick(c.Tenant, d.Tenant), ApiToken: pick(c.ApiToken, d.ApiToken),
		ModelRoute: pick(c.ModelRoute, d.ModelRoute), PriceRule: pick(c.PriceRule, d.PriceRule),
		GenerationTask: pick(c.GenerationTask, d.GenerationTask), TaskWebhook: pick(c.TaskWebhook, d.TaskWebhook),
		Batch: pick(c.Batch, d.Batch)}
}

// Setup registers every reconciler with the manager. Indexes are registered
// separately (index.AddIndexes) because the gateway needs them too.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Ledger == nil {
		return errors.New("controllers: a ledger is required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	workers := o.Concurrency.withDefaults()
	mirrors := newMirrorBudget(o.MirrorWritesPerSecond)
	webhooks := webhook.NewSender(o.Guard, "")
	if err := (&TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: o.Ledger, Clock: o.Clock, mirrors: mirrors,
		Guard: o.Guard, Webhooks: webhooks,
		BalanceSyncPeriod: o.SyncPeriod, Workers: workers.Tenant, Events: mgr.GetEventRecorder("modelgate-tenant")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("tenant controller: %w", err)
	}
	if err := (&ApiTokenReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: o.Ledger, Clock: o.Clock, mirrors: mirrors, Webhooks: webhooks,
		UsageSyncPeriod: o.SyncPeriod, Workers: workers.ApiToken, Events: mgr.GetEventRecorder("modelgate-apitoken")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("apitoken controller: %w", err)
	}
	if err := (&ModelRouteReconciler{Client: mgr.GetClient(), KnownProvider: o.KnownProvider, Upstreams: o.Upstreams,
		Workers: workers.ModelRoute}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("modelroute controller: %w", err)
	}
	var copier generationtask.AssetCopier
	if o.Blobs != nil {
		copier = assetcopy.NewCopier(o.Blobs, o.Blobs, o.Guard)
	}
	if err := (&generationtask.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: o.Ledger, Upstreams: o.Upstreams, Blobs: o.Blobs, Clock: o.Clock,
		Downloads: o.Downloads, Copier: copier,
		Retention: o.TaskRetention, ReviewDeadline: o.ReviewDeadline, Workers: workers.GenerationTask,
		Events: mgr.GetEventRecorder("modelgate-generationtask")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("generationtask controller: %w", err)
	}
	if err := (&generationtask.WebhookReconciler{Client: mgr.GetClient(), Blobs: o.Blobs, Clock: o.Clock, Workers: workers.TaskWebhook, Webhooks: webhooks,
		Events: mgr.GetEventRecorder("modelgate-taskwebhook")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("generationtask webhook controller: %w", err)
	}
	if o.BatchLines != nil && o.BatchFiles != nil && o.Blobs != nil && !o.NoBatchController {
		if err := (&batch.Reconciler{Client: mgr.GetClient(), Lines: o.BatchLines, Files: o.BatchFiles, Ledger: o.Ledger,
			Blobs: o.Blobs, Clock: o.Clock, Workers: workers.Batch, PassBudget: o.BatchPassBudget,
			Upstream: o.BatchUpstream, PollInterval: o.BatchPollInterval}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("batch controller: %w", err)
		}
	}
	var blobs tasks.BlobDeleter
	if o.Blobs != nil { // not a typed nil in the interface
		blobs = o.Blobs
	}
	if err := mgr.Add(tasks.NewReviewSweeper(o.Ledger, blobs, o.Clock, o.ReviewAssetRetention)); err != nil {
		return fmt.Errorf("review sweeper: %w", err)
	}
	k := housekeeping.New(o.Ledger, o.Clock)
	k.LeaseSweepInterval = o.Housekeeping.LeaseSweepInterval
	k.StaleRefundInterval = o.Housekeeping.StaleRefundInterval
	k.StaleAge = o.Housekeeping.StaleAge
	k.RetentionInterval = o.Housekeeping.RetentionInterval
	k.Retention = o.Housekeeping.Retention
	if err := mgr.Add(k); err != nil {
		return fmt.Errorf("housekeeping: %w", err)
	}
	if err := (&PriceRuleReconciler{Client: mgr.GetClient(), Workers: workers.PriceRule}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pricerule controller: %w", err)
	}
	return nil
}
