package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func start(t *testing.T, opts Options) (*Server, context.CancelFunc, chan error) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	NewWithT(t).Eventually(s.Addr).ShouldNot(BeEmpty())
	return s, cancel, done
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	g := NewWithT(t)
	dbErr := errors.New("connection refused")
	s, cancel, done := start(t, Options{ReadyChecks: map[string]ReadyCheck{
		"ledger": func(context.Context) error { return dbErr },
	}})
	base := "http://" + s.Addr()

	code, _ := get(t, base+"/healthz")
	g.Expect(code).To(Equal(http.StatusOK))
	code, body := get(t, base+"/readyz")
	g.Expect(code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(body).To(ContainSubstring("ledger: not ready: connection refused"))

	dbErr = nil
	code, _ = get(t, base+"/readyz")
	g.Expect(code).To(Equal(http.StatusOK))

	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}

func TestShutdownFinishesInFlightRequests(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	entered := make(chan struct{})
	s := New(Options{Addr: "127.0.0.1:0", ShutdownGrace: 10 * time.Second})
	s.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = w.Write([]byte("finished"))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	g.Eventually(s.Addr).ShouldNot(BeEmpty())

	result := make(chan string, 1)
	go func() { _, body := get(t, "http://"+s.Addr()+"/slow"); result <- body }()
	<-entered
	cancel() // shutdown begins while the request is in flight
	g.Consistently(done, 200*time.Millisecond).ShouldNot(Receive())
	close(release)
	g.Eventually(result).Should(Receive(Equal("finished")))
	g.Eventually(done).Should(Receive(BeNil()))
}

// HTTP/1.1 and HTTP/2 without TLS (prior knowledge) on the same port.
func TestServesHTTP1AndH2C(t *testing.T) {
	g := NewWithT(t)
	s, cancel, done := start(t, Options{})
	url := "http://" + s.Addr() + "/healthz"

	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.ProtoMajor).To(Equal(1))

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	resp, err = (&http.Client{Transport: tr}).Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.ProtoMajor).To(Equal(2))
	tr.CloseIdleConnections()

	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}
