package wire

import (
	"github.com/modelgate/modelgate/gateway/providers"
	"github.com/modelgate/modelgate/gateway/telemetry"
)

// The upstream client of the text providers carries the trace context of
// each upstream attempt (telemetry.Transport). It is wrapped here, once, at
// package initialisation: before any request can use the client, so no
// request races the assignment, and whether or not tracing is on at that
// point (a test turns it on later); off, the wrapper costs one atomic load
// per upstream request.
func init() {
	providers.Client.Transport = telemetry.Transport(providers.Client.Transport)
}
