package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// observed wraps a ResponseWriter to learn the status code and the time of
// the first byte, for metrics. Unwrap keeps http.ResponseController (flush)
// working through it.
type observed struct {
	http.ResponseWriter
	start     time.Time
	status    int
	firstByte time.Duration
	// info is the request's (instrument).
	info     *requestInfo
	endpoint string
}

func (o *observed) WriteHeader(code int) {
	if o.status == 0 {
		o.status = code
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *observed) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	if o.firstByte == 0 {
		o.firstByte = time.Since(o.start)
	}
	return o.ResponseWriter.Write(b)
}

func (o *observed) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// record reports one finished request. model is "" until a route was found,
// so client-chosen names never become label values.
func (o *observed) record(endpoint, model, backend string) {
	if model == "" {
		model = "unknown"
	}
	status := o.status
	if status == 0 {
		status = http.StatusOK
	}
	m := requestMetricsFor(endpoint, model)
	m.requests(backend, status).Inc()
	m.duration.Observe(time.Since(o.start).Seconds())
	if o.firstByte > 0 {
		m.ttfb.Observe(o.firstByte.Seconds())
	}
}

// The metric children of the hot path, looked up once per label set:
// WithLabelValues hashes its labels and locks the vector on every call.
// Label values come from routes, backends and status codes (bounded sets),
// never from the client.
var (
	requestMetrics  sync.Map // [2]string{endpoint, model} → *requestMetric
	modelMetrics    sync.Map // model → *billingMetric
	tenantMetrics   sync.Map // tenant namespace → *billingMetric
	attemptCounters sync.Map // backend → prometheus.Counter
)

type requestMetric struct {
	endpoint, model string
	duration, ttfb  prometheus.Observer
	counters        sync.Map // counterKey → prometheus.Counter
}

type counterKey struct {
	backend string
	status  int
}

func requestMetricsFor(endpoint, model string) *requestMetric {
	key := [2]string{endpoint, model}
	if m, ok := requestMetrics.Load(key); ok {
		return m.(*requestMetric)
	}
	m, _ := requestMetrics.LoadOrStore(key, &requestMetric{endpoint: endpoint, model: model,
		duration: metrics.Duration.WithLabelValues(endpoint, model),
		ttfb:     metrics.TimeToFirstByte.WithLabelValues(endpoint, model)})
	return m.(*requestMetric)
}

func (m *requestMetric) requests(backend string, status int) prometheus.Counter {
	key := counterKey{backend, status}
	if c, ok := m.counters.Load(key); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.counters.LoadOrStore(key, metrics.Requests.WithLabelValues(m.endpoint, m.model, backend, strconv.Itoa(status)))
	return c.(prometheus.Counter)
}

// billingMetric holds the billing counters of a model or of a tenant.
type billingMetric struct {
	quota, input, output, cacheRead, cacheWrite prometheus.Counter
}

// add counts one settled request's charge and tokens.
func (m *billingMetric) add(quota billing.Quota, u upstream.Usage) {
	m.quota.Add(float64(quota))
	m.input.Add(float64(u.PromptTokens()))
	m.output.Add(float64(u.OutputTokens))
	m.cacheRead.Add(float64(deref(u.CacheReadTokens)))
	m.cacheWrite.Add(float64(deref(u.CacheWriteTokens)))
}

func modelMetricsFor(model string) *billingMetric {
	return billingMetricsFor(&modelMetrics, model, metrics.QuotaCharged, metrics.Tokens)
}

func tenantMetricsFor(namespace string) *billingMetric {
	return billingMetricsFor(&tenantMetrics, namespace, metrics.TenantQuotaCharged, metrics.TenantTokens)
}

func billingMetricsFor(cache *sync.Map, label string, quota, tokens *prometheus.CounterVec) *billingMetric {
	if m, ok := cache.Load(label); ok {
		return m.(*billingMetric)
	}
	m, _ := cache.LoadOrStore(label, &billingMetric{
		quota:      quota.WithLabelValues(label),
		input:      tokens.WithLabelValues(label, "input"),
		output:     tokens.WithLabelValues(label, "output"),
		cacheRead:  tokens.WithLabelValues(label, "cache_read"),
		cacheWrite: tokens.WithLabelValues(label, "cache_write"),
	})
	return m.(*billingMetric)
}

// upstreamAttempts is the attempt counter of a backend.
func upstreamAttempts(backend string) prometheus.Counter {
	if c, ok := attemptCounters.Load(backend); ok {
		return c.(prometheus.Counter)
	}
	c, _ := attemptCounters.LoadOrStore(backend, metrics.UpstreamAttempts.WithLabelValues(backend))
	return c.(prometheus.Counter)
}
