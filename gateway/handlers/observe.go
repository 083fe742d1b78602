package handlers

import (
	"net/http"
	"strconv"
	"time"

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
	metrics.Requests.WithLabelValues(endpoint, model, backend, strconv.Itoa(status)).Inc()
	metrics.Duration.WithLabelValues(endpoint, model).Observe(time.Since(o.start).Seconds())
	if o.firstByte > 0 {
		metrics.TimeToFirstByte.WithLabelValues(endpoint, model).Observe(o.firstByte.Seconds())
	}
}
