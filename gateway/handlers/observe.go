package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/gateway/metrics"
)

// observed wraps a ResponseWriter to learn the status code and the time of
// the first byte, for metrics. Unwrap keeps http.ResponseController (flush)
// working through it.
type observed struct {
	http.ResponseWriter
	start     time.Time
	status    int
	firstByte time.Duration
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
	requestMetrics sync.Map // [2]string{endpoint, model} → *requestMetric
	modelMetrics   sync.Map // model → *modelMetric
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

// modelMetric holds a model's billing counters.
type modelMetric struct {
	quota, input, output, cacheRead, cacheWrite prometheus.Counter
}

func modelMetricsFor(model string) *modelMetric {
	if m, ok := modelMetrics.Load(model); ok {
		return m.(*modelMetric)
	}
	m, _ := modelMetrics.LoadOrStore(model, &modelMetric{
		quota:      metrics.QuotaCharged.WithLabelValues(model),
		input:      metrics.Tokens.WithLabelValues(model, "input"),
		output:     metrics.Tokens.WithLabelValues(model, "output"),
		cacheRead:  metrics.Tokens.WithLabelValues(model, "cache_read"),
		cacheWrite: metrics.Tokens.WithLabelValues(model, "cache_write"),
	})
	return m.(*modelMetric)
}
