// Package metrics defines the gateway's Prometheus metrics. They are
// registered in controller-runtime's registry, so the manager's and the
// gateway's metrics endpoints serve them next to controller-runtime's own.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Requests counts finished API requests by endpoint, model, backend and HTTP status.
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_requests_total",
		Help: "API requests by endpoint, model, backend and HTTP status code.",
	}, []string{"endpoint", "model", "backend", "code"})

	// Duration is the total time of a request.
	Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "modelgate_request_duration_seconds",
		Help:    "Total request time, by endpoint and model.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"endpoint", "model"})

	// TimeToFirstByte is the time until the first byte of the answer was written.
	TimeToFirstByte = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "modelgate_time_to_first_byte_seconds",
		Help:    "Time until the first byte of the answer, by endpoint and model.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"endpoint", "model"})

	// UpstreamErrors counts failed upstream attempts by backend and status.
	UpstreamErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_upstream_errors_total",
		Help: "Failed upstream attempts by backend and status (0: no response).",
	}, []string{"backend", "status"})

	// UpstreamAttempts counts upstream attempts by backend, failed or not:
	// the denominator of a backend's error ratio.
	UpstreamAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_upstream_attempts_total",
		Help: "Upstream attempts by backend, failed or not.",
	}, []string{"backend"})

	// Tokens counts billed tokens by model and kind (input, output, cache_read, cache_write).
	Tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_tokens_total",
		Help: "Billed tokens by model and kind.",
	}, []string{"model", "kind"})

	// QuotaCharged counts charged quota units by model.
	QuotaCharged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_quota_charged_total",
		Help: "Quota units charged, by model (500000 = 1 USD).",
	}, []string{"model"})

	// TenantTokens and TenantQuotaCharged are the same figures by tenant
	// (its namespace), not crossed with the model: the series grow with
	// tenants plus models, not their product.
	TenantTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_tenant_tokens_total",
		Help: "Billed tokens by tenant namespace and kind.",
	}, []string{"tenant", "kind"})
	TenantQuotaCharged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_tenant_quota_charged_total",
		Help: "Quota units charged, by tenant namespace (500000 = 1 USD).",
	}, []string{"tenant"})

	// ReservationsRefused counts requests refused for quota or rate limits.
	ReservationsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_reservations_refused_total",
		Help: "Requests refused before the upstream call, by reason (quota, rate_limit).",
	}, []string{"reason"})
)

// Housekeeping of the ledger (the manager's leader runs it).
var (
	// LeasesSwept counts expired leases released by the lease sweeper.
	LeasesSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelgate_leases_swept_total",
		Help: "Expired leases (of replicas that stopped renewing them) released by the sweeper.",
	})
	// LeaseQuotaReturned counts quota that swept leases still held.
	LeaseQuotaReturned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelgate_lease_quota_returned_total",
		Help: "Quota units returned to token and tenant balances by the lease sweeper.",
	})
	// StaleReservationsRefunded counts orphaned reservations refunded.
	StaleReservationsRefunded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelgate_stale_reservations_refunded_total",
		Help: "Reservations left open by a gateway that died, refunded by the stale-reservation refunder.",
	})
	// StaleQuotaRefunded counts the quota those reservations held.
	StaleQuotaRefunded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelgate_stale_quota_refunded_total",
		Help: "Quota units returned by the stale-reservation refunder.",
	})
	// RetentionRowsRemoved counts rows the retention pass removed, by table
	// (the rows of a dropped partition included). The label is one of a
	// fixed set of table names.
	RetentionRowsRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_retention_rows_removed_total",
		Help: "Rows removed by the retention pass (expired usage, conversations, closed reservations, finished tasks), by table.",
	}, []string{"table"})
	// RetentionPartitionsRemoved counts whole partitions the retention pass
	// dropped (PostgreSQL's monthly usage_logs partitions), by table.
	RetentionPartitionsRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_retention_partitions_removed_total",
		Help: "Partitions dropped by the retention pass, by table.",
	}, []string{"table"})
)

// BudgetAlerts counts budget alerts raised (the manager's leader): one per
// crossing of a threshold of a Tenant's or an ApiToken's spec.alerts. The
// labels are bounded: the tenant's namespace, the object ("tenant" or
// "api_token") and the kind of threshold (remaining_percent,
// remaining_credits, daily_limit_percent, monthly_limit_percent), never
// an amount or a name the tenant chose.
var BudgetAlerts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "modelgate_budget_alerts_total",
	Help: "Budget alerts raised (a threshold of spec.alerts crossed), by tenant namespace, object and kind of threshold.",
}, []string{"tenant", "object", "threshold"})

func init() {
	ctrlmetrics.Registry.MustRegister(Requests, Duration, TimeToFirstByte, UpstreamErrors, UpstreamAttempts, Tokens, QuotaCharged,
		TenantTokens, TenantQuotaCharged, ReservationsRefused,
		LeasesSwept, LeaseQuotaReturned, StaleReservationsRefunded, StaleQuotaRefunded, BudgetAlerts,
		RetentionRowsRemoved, RetentionPartitionsRemoved)
}

// UsageWriter is what the usage-writer gauges read.
type UsageWriter interface {
	QueueDepth() int
	SpoolRows() int64
	SpoolBytes() int64
}

// RegisterUsageWriter exports the usage writer's queue depth and spool size.
// Registering a second writer (tests, dev restarts) replaces nothing: the
// first registration wins and the error is ignored.
func RegisterUsageWriter(w UsageWriter) {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_usage_queue_depth",
			Help: "Usage rows waiting in memory to be written."}, func() float64 { return float64(w.QueueDepth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_usage_spool_rows",
			Help: "Usage rows spooled to disk while the database is unreachable."}, func() float64 { return float64(w.SpoolRows()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_usage_spool_bytes",
			Help: "Size of the usage spool on disk."}, func() float64 { return float64(w.SpoolBytes()) }),
	} {
		_ = ctrlmetrics.Registry.Register(c)
	}
}
