package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// startWith runs a server with the handlers mount adds.
func startWith(t *testing.T, opts Options, mount func(*Server)) (*Server, context.CancelFunc, chan error) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s := New(opts)
	mount(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	NewWithT(t).Eventually(s.Addr).ShouldNot(BeEmpty())
	t.Cleanup(cancel)
	return s, cancel, done
}

// startStream sends a stream's status, header and first event through
// net/http, as the gateway's handler does before it detaches.
func startStream(w http.ResponseWriter, first string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req-1")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, first)
	_ = http.NewResponseController(w).Flush()
}

// mountDetached serves pattern with a stream that sends first through
// net/http, then detaches and hands the rest to rest on a goroutine of its
// own, as the gateway's handler does.
func mountDetached(s *Server, pattern, first string, rest func(d *Detached)) {
	s.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		startStream(w, first)
		d, ok := s.Detach(w, r)
		if !ok {
			_, _ = io.WriteString(w, "not detached")
			return
		}
		go rest(d)
	}))
}

// streamer serves POST /stream: its first event through net/http, then,
// detached, two more, each flushed, the last only after gate yields.
func streamer(t *testing.T, gate <-chan struct{}) func(*Server) {
	return func(s *Server) {
		mountDetached(s, "POST /stream", "data: 0\n\n", func(d *Detached) {
			for i := 1; i < 3; i++ {
				if i == 2 && gate != nil {
					<-gate
				}
				_, _ = fmt.Fprintf(d, "data: %d\n\n", i)
				if err := d.FlushError(); err != nil {
					t.Errorf("flush: %v", err)
				}
			}
			d.Finish()
		})
	}
}

const events = "data: 0\n\ndata: 1\n\ndata: 2\n\n"

// A detached stream is a well-formed chunked response whose events arrive
// as they are flushed, and its connection carries the next requests.
func TestDetachedStreamKeepsItsConnection(t *testing.T) {
	g := NewWithT(t)
	gate := make(chan struct{})
	s, cancel, done := startWith(t, Options{}, streamer(t, gate))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	do := func(method, path string) *http.Response {
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method,
			"http://"+s.Addr()+path, strings.NewReader(`{"stream":true}`))
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		return resp
	}

	resp := do(http.MethodPost, "/stream")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.TransferEncoding).To(Equal([]string{"chunked"}))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	g.Expect(resp.Header.Get("X-Request-Id")).To(Equal("req-1"))
	g.Expect(resp.Header.Get("Date")).NotTo(BeEmpty())
	br := bufio.NewReader(resp.Body)
	first := ""
	for !strings.HasSuffix(first, "data: 1\n\n") { // the detached flush arrives before the gate opens
		line, err := br.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		first += line
	}
	g.Expect(first).To(Equal("data: 0\n\ndata: 1\n\n"))
	close(gate)
	rest, err := io.ReadAll(br)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first + string(rest)).To(Equal(events))
	_ = resp.Body.Close()

	for range 2 { // a plain request, then a stream, on the connection handed back
		resp = do(http.MethodGet, "/healthz")
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(string(body)).To(Equal("ok\n"))
		resp = do(http.MethodPost, "/stream")
		body, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(string(body)).To(Equal(events))
	}
	g.Expect(reused).To(Equal([]bool{false, true, true, true, true}))

	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}

// Bytes of the next request that net/http read ahead (a pipelining client)
// go back to the server with the connection.
func TestDetachedStreamKeepsPipelinedRequest(t *testing.T) {
	g := NewWithT(t)
	s, _, _ := startWith(t, Options{}, streamer(t, nil))
	conn, err := net.Dial("tcp", s.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	body := `{"stream":true}`
	_, err = fmt.Fprintf(conn, "POST /stream HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%sGET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n",
		len(body), body)
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(events))
	resp, err = http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	b, _ = io.ReadAll(resp.Body)
	g.Expect(string(b)).To(Equal("ok\n"))
}

// Shutdown waits for a detached stream and closes a connection that waits
// idle after one.
func TestShutdownWaitsForDetachedStreams(t *testing.T) {
	g := NewWithT(t)
	gate := make(chan struct{})
	s, cancel, done := startWith(t, Options{ShutdownGrace: 10 * time.Second}, func(s *Server) {
		streamer(t, gate)(s)
		mountDetached(s, "POST /quick", "", func(d *Detached) { _, _ = io.WriteString(d, "quick"); d.Finish() })
	})

	idle, err := net.Dial("tcp", s.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	defer idle.Close()
	_, err = io.WriteString(idle, "POST /quick HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	b, _ := io.ReadAll(resp.Body)
	g.Expect(string(b)).To(Equal("quick"))

	// The stream is detached once its second event (before the gate) is in.
	stream, err := http.Post("http://"+s.Addr()+"/stream", "application/json", strings.NewReader("{}"))
	g.Expect(err).NotTo(HaveOccurred())
	defer stream.Body.Close()
	sr := bufio.NewReader(stream.Body)
	got := ""
	for !strings.HasSuffix(got, "data: 1\n\n") {
		line, err := sr.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		got += line
	}
	result := make(chan string, 1)
	go func() { b, _ := io.ReadAll(sr); result <- got + string(b) }()

	cancel()
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	g.Expect(err).To(MatchError(io.EOF)) // closed at once, not at the idle timeout
	g.Consistently(done, 300*time.Millisecond).ShouldNot(Receive())
	close(gate)
	g.Eventually(result).Should(Receive(Equal(events)))
	g.Eventually(done).Should(Receive(BeNil()))
}

// A client that leaves fails the stream's writes and ends its context.
func TestDetachedStreamNoticesClientGone(t *testing.T) {
	g := NewWithT(t)
	gone := make(chan error, 1) // the context's error once a flush failed
	s, _, _ := startWith(t, Options{}, func(s *Server) {
		mountDetached(s, "POST /forever", "", func(d *Detached) {
			defer d.Finish()
			for {
				_, _ = io.WriteString(d, "data: tick\n\n")
				if d.FlushError() != nil {
					gone <- d.Context().Err()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	})
	conn, err := net.Dial("tcp", s.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.WriteString(conn, "POST /forever HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	_ = conn.Close()
	g.Eventually(gone, 5*time.Second).Should(Receive(MatchError(context.Canceled)))
}

// What cannot be detached stays with net/http: a request that asks to
// close its connection, and HTTP/2.
func TestDetachRefused(t *testing.T) {
	g := NewWithT(t)
	s, _, _ := startWith(t, Options{}, func(s *Server) {
		s.Handle("POST /try", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := s.Detach(w, r); ok {
				t.Error("detached")
				return
			}
			_, _ = io.WriteString(w, "stayed")
		}))
	})
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+"/try", nil)
	req.Close = true
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	for _, c := range []*http.Client{http.DefaultClient, {Transport: h2c}} {
		resp, err := c.Do(req.Clone(context.Background()))
		g.Expect(err).NotTo(HaveOccurred())
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(string(b)).To(Equal("stayed"))
	}
}
