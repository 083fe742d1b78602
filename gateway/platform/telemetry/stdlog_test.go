package telemetry

import (
	"bytes"
	"log"
	"log/slog"
	"testing"

	. "github.com/onsi/gomega"
)

// net/http's note about an idle connection that received bytes quotes
// them; the log keeps the note and loses the bytes.
func TestStdLogLosesPeerBytes(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	defer log.SetOutput(log.Writer())
	RouteStdLog(slog.New(slog.NewJSONHandler(&out, nil)))
	log.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=%v",
		`HTTP/1.1 200 OK\r\n\r\n{"tenant":"A","secret":"sk-live-AAAA"}`, nil)
	g.Expect(out.String()).To(ContainSubstring("Unsolicited response received on idle HTTP channel starting with (redacted); err=<nil>"))
	g.Expect(out.String()).NotTo(ContainSubstring("sk-live"))
	g.Expect(out.String()).To(ContainSubstring(`"level":"WARN"`))
}
