package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
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

// Requests that try to smuggle a second request past the first one's body
// on the same connection: the second is never served, and the connection
// closes after the first answer. A chunked body that breaks off (net/http
// closes after the handler's 400); a body framed both by Content-Length
// and Transfer-Encoding (net/http frames it by the chunks, so a proxy in
// front that framed it by the length could disagree: the server closes).
// A plain pipelined request after a complete one is served, in order.
func TestNoRequestIsSmuggledPastABody(t *testing.T) {
	var smuggled atomic.Int32
	s, cancel, done := start(t, Options{})
	s.Handle("POST /v1/messages", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("answered"))
	}))
	s.Handle("GET /smuggled", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		smuggled.Add(1)
		_, _ = w.Write([]byte("smuggled"))
	}))
	next := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	cases := []struct {
		name, raw string
		answers   []int
	}{
		{"bad-chunk", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + next, []int{400}},
		{"length-and-chunked", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + next, []int{200}},
		{"pipelined", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + next, []int{200, 200}},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		before := smuggled.Load()
		c, err := net.Dial("tcp", s.Addr())
		g.Expect(err).NotTo(HaveOccurred())
		_, err = io.WriteString(c, tc.raw)
		g.Expect(err).NotTo(HaveOccurred())
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		var got []int
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				var ne net.Error
				g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeFalse(), "%s: the server closed the connection (%v)", tc.name, err)
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			got = append(got, resp.StatusCode)
			if len(got) == len(tc.answers) && tc.name == "pipelined" {
				break // keep-alive: the connection stays open
			}
		}
		_ = c.Close()
		g.Expect(got).To(Equal(tc.answers), tc.name)
		if tc.name != "pipelined" {
			g.Expect(smuggled.Load()).To(Equal(before), "%s: the request after the body was served", tc.name)
		}
	}
	cancel()
	NewWithT(t).Eventually(done).Should(Receive(BeNil()))
}
