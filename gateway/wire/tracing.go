package wire

import (
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// The shared upstream client carries the trace context of
// each upstream attempt (telemetry.Transport). It is wrapped here, once, at
// package initialisation: before any request can use the client, so no
// request races the assignment, and whether or not tracing is on at that
// point (a test turns it on later); off, the wrapper costs one atomic load
// per upstream request.
func init() {
	upstream.Client.Transport = telemetry.Transport(upstream.Client.Transport)
}
