package fakeupstream_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// TestMain makes the clients these tests use without saying so (net/http's
// defaults, which the official SDKs take too) trust the fakes' certificate:
// the fakes serve HTTPS as the vendors do.
func TestMain(m *testing.M) {
	http.DefaultTransport = fakeupstream.Client().Transport
	os.Exit(m.Run())
}
