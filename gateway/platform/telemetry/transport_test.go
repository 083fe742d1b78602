package telemetry_test

import (
	"net/http"
	"testing"

	"github.com/modelgate/modelgate/gateway/platform/telemetry"
)

// closeCounter is a transport that counts CloseIdleConnections calls.
type closeCounter struct {
	http.RoundTripper
	closed int
}

func (c *closeCounter) CloseIdleConnections() { c.closed++ }

// A client on the tracing wrapper must still be able to close its pool:
// http.Client.CloseIdleConnections reaches the transport only through the
// method, and an open pool keeps a goroutine per idle connection.
func TestTransportClosesIdleConnections(t *testing.T) {
	inner := &closeCounter{RoundTripper: http.DefaultTransport}
	c := &http.Client{Transport: telemetry.Transport(inner)}
	c.CloseIdleConnections()
	if inner.closed != 1 {
		t.Fatalf("CloseIdleConnections reached the wrapped transport %d times, want 1", inner.closed)
	}
}
