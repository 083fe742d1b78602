package wire

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The profiling endpoint serves the pprof index and a goroutine profile on
// its own address and stops with its context.
func TestPprofServerServesProfilesUntilStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pprofServer{addr: addr}.Start(ctx) }()

	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		res, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		body = string(b)
		break
	}
	if !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("no goroutine profile from the pprof endpoint: %.200q", body)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pprof endpoint did not stop with its context")
	}
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Fatal("the pprof endpoint still answers after it stopped")
	}
}
