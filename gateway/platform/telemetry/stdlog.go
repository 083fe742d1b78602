package telemetry

import (
	"bytes"
	"log"
	"log/slog"
	"regexp"
)

// RouteStdLog sends what the standard library logs through the log
// package (net/http's transport and server write there) to logger, at
// warning level, without the bytes net/http quotes from a peer: its
// "Unsolicited response received on idle HTTP channel starting with …"
// carries the start of an upstream's answer, which may be a tenant's
// content, and logs must hold none. Call it after slog.SetDefault, which
// points the log package at the default handler itself.
func RouteStdLog(logger *slog.Logger) {
	log.SetFlags(0)
	log.SetPrefix("")
	log.SetOutput(stdLogWriter{logger})
}

type stdLogWriter struct{ logger *slog.Logger }

// peerBytes is net/http's quotation of what a peer sent.
var peerBytes = regexp.MustCompile(`starting with "(?:[^"\\]|\\.)*"`)

func (w stdLogWriter) Write(p []byte) (int, error) {
	msg := peerBytes.ReplaceAll(bytes.TrimRight(p, "\n"), []byte("starting with (redacted)"))
	w.logger.Warn(string(msg), "source", "go standard library")
	return len(p), nil
}
