package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/translate"
)

func newTransport() *Transport {
	return &Transport{Next: &http.Transport{}, MaxIdlePerHost: 4}
}

// rawServer answers each request read on a connection with script(i) (i:
// the request's number on the connection), written in the given pieces;
// close after the answer when the piece list ends with "".
type rawServer struct {
	ln     net.Listener
	conns  atomic.Int32
	bodies chan string
}

func startRaw(t *testing.T, script func(i int) []string) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, bodies: make(chan string, 64)}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(c, script)
		}
	}()
	return s
}

func (s *rawServer) serve(c net.Conn, script func(int) []string) {
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		s.bodies <- string(b)
		pieces := script(i)
		for _, p := range pieces {
			if p == "" {
				return
			}
			if _, err := c.Write([]byte(p)); err != nil {
				return
			}
			time.Sleep(time.Millisecond) // each piece its own read
		}
	}
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/chat/completions" }

func post(t *testing.T, rt http.RoundTripper, u, body string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b), err
}

// The answers a model server gives, each split across reads in awkward
// places, read through this transport and through net/http: the same
// status, fields and body.
func TestAnswersMatchNetHTTP(t *testing.T) {
	cases := map[string][]string{
		"content length":       {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"},
		"content length split": {"HTTP/1.1 200 OK\r\nContent-Le", "ngth: 11\r\n\r\n{\"ok\"", ":true}"},
		"chunked events": {
			"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
			"18\r\ndata: {\"n\":1}\n\ndata: x\n\n\r\n", "f", "\r\ndata: {\"n\":2", "}\n\n\r", "\n0\r\n\r\n",
		},
		"chunked with extension and trailer": {
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Usage\r\n\r\n5;name=v\r\nhello\r\n0\r\nX-Usage: 3\r\n\r\n",
		},
		"chunk sizes in capitals with padding": {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA \r\n0123456789\r\n0\r\n\r\n"},
		"informational first":                  {"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		"no content":                           {"HTTP/1.1 204 No Content\r\n\r\n"},
		"error answer":                         {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 7\r\n\r\n{\"e\":1}"},
		"to close":                             {"HTTP/1.1 200 OK\r\n\r\nuntil the ", "end", ""},
		"http/1.0":                             {"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold", ""},
	}
	for name, pieces := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := startRaw(t, func(int) []string { return pieces })
			want, wantBody, err := post(t, &http.Transport{DisableCompression: true}, srv.url(), `{"a":1}`)
			g.Expect(err).NotTo(HaveOccurred())
			got, gotBody, err := post(t, newTransport(), srv.url(), `{"a":1}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gotBody).To(Equal(wantBody))
			g.Expect(got.StatusCode).To(Equal(want.StatusCode))
			g.Expect(got.Header).To(Equal(want.Header))
			g.Expect(got.ContentLength).To(Equal(want.ContentLength))
			g.Expect(got.Close).To(Equal(want.Close))
			g.Expect(<-srv.bodies).To(Equal(`{"a":1}`))
		})
	}
}

func TestMalformedAnswersFail(t *testing.T) {
	cases := map[string][]string{
		"bad chunk size":        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		"data longer than size": {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n"},
		"cut in a chunk":        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", ""},
		"cut before length":     {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel", ""},
	}
	for name, pieces := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := startRaw(t, func(int) []string { return pieces })
			_, _, err := post(t, newTransport(), srv.url(), "{}")
			g.Expect(err).To(HaveOccurred())
		})
	}
}

// Requests one after another share one connection, and the server sees
// the request net/http would have sent.
func TestKeepsConnectionsAlive(t *testing.T) {
	g := NewWithT(t)
	var conns atomic.Int32
	var seen []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Host+" "+r.Header.Get("User-Agent")+" "+r.Header.Get("X-Api-Key")+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			_, _ = io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := newTransport()
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?beta=true", bytes.NewReader([]byte(`{"i":`+string(rune('0'+i))+`}`)))
		req.Header.Set("X-Api-Key", "k")
		resp, err := tr.RoundTrip(req)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal("data: a\n\ndata: b\n\ndata: c\n\n"))
		g.Expect(resp.Body.Close()).To(Succeed())
	}
	g.Expect(conns.Load()).To(Equal(int32(1)))
	g.Expect(seen).To(HaveLen(5))
	g.Expect(seen[4]).To(Equal(`POST /v1/messages?beta=true ` + strings.TrimPrefix(srv.URL, "http://") + ` Go-http-client/1.1 k {"i":4}`))
}

// A connection the server closed while it sat idle: the request goes again
// on a new one, body and all.
func TestResendsWhenIdleConnectionWasClosed(t *testing.T) {
	g := NewWithT(t)
	// Each connection answers one request, then closes without saying so.
	srv := startRaw(t, func(int) []string {
		return []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", ""}
	})
	tr := newTransport()
	for range 3 {
		_, body, err := post(t, tr, srv.url(), `{"same":true}`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(body).To(Equal("ok"))
		time.Sleep(20 * time.Millisecond) // the close reaches the idle connection
	}
	for range 3 {
		g.Expect(<-srv.bodies).To(Equal(`{"same":true}`))
	}
	g.Expect(srv.conns.Load()).To(Equal(int32(3)))
}

// An answer that the server marks as the connection's last, or that left
// bytes past its end, does not go back to the pool.
func TestConnectionOutOfStepIsNotReused(t *testing.T) {
	for name, answer := range map[string]string{
		"connection close": "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"bytes past end":   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := startRaw(t, func(int) []string { return []string{answer} })
			tr := newTransport()
			for range 2 {
				_, body, err := post(t, tr, srv.url(), "{}")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(body).To(Equal("ok"))
			}
			g.Expect(srv.conns.Load()).To(Equal(int32(2)))
		})
	}
}

// Cancelling the request's context ends a read that waits on a stream.
func TestContextEndsWaitingRead(t *testing.T) {
	g := NewWithT(t)
	srv := startRaw(t, func(int) []string {
		return []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n"} // and then nothing
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url(), strings.NewReader("{}"))
	resp, err := newTransport().RoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("data:1"))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = resp.Body.Read(buf)
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(resp.Body.Close()).To(Succeed())
}

// Closing a body not read to its end closes the connection.
func TestCloseBeforeEndDropsConnection(t *testing.T) {
	g := NewWithT(t)
	srv := startRaw(t, func(int) []string {
		return []string{"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab", "cd"}
	})
	tr := newTransport()
	req, _ := http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	_, err = resp.Body.Read(make([]byte, 8))
	g.Expect(err).To(HaveOccurred())
	_, body, err := post(t, tr, srv.url(), "{}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal("abcd"))
	g.Expect(srv.conns.Load()).To(Equal(int32(2)))
}

// What this transport does not serve goes to Next unchanged.
func TestOthersGoToNext(t *testing.T) {
	g := NewWithT(t)
	next := &recorder{}
	proxied := func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "via-proxy:80" {
			return url.Parse("http://proxy:3128")
		}
		return nil, nil
	}
	tr := &Transport{Next: next, Proxy: proxied}
	for _, make := range []func() *http.Request{
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1", strings.NewReader("{}"))
			return r
		},
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://via-proxy:80/v1", strings.NewReader("{}"))
			return r
		},
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://up/v1", io.NopCloser(strings.NewReader("{}")))
			return r // unknown length
		},
		func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://up/v1", strings.NewReader("{}"))
			r.Header.Set("Expect", "100-continue")
			return r
		},
	} {
		req := make()
		_, err := tr.RoundTrip(req)
		g.Expect(err).To(MatchError(errRecorded))
		g.Expect(next.last).To(BeIdenticalTo(req))
	}
}

var errRecorded = errors.New("recorded")

type recorder struct{ last *http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.last = req
	return nil, errRecorded
}

// A header value that would split the request is refused, as net/http
// refuses it.
func TestRefusesInvalidFields(t *testing.T) {
	g := NewWithT(t)
	srv := startRaw(t, func(int) []string { return []string{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"} })
	req, _ := http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
	req.Header.Set("Anthropic-Beta", "x\r\nX-Injected: 1")
	_, err := newTransport().RoundTrip(req)
	g.Expect(err).To(MatchError(ContainSubstring("invalid header field value")))
	g.Expect(srv.conns.Load()).To(BeZero())
}

// An idle connection the server closed a while ago is found closed before
// it is reused: the request goes on a new connection without needing to
// be sent again (this body could not be).
func TestIdleConnectionCheckedBeforeReuse(t *testing.T) {
	g := NewWithT(t)
	srv := startRaw(t, func(int) []string {
		return []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", ""}
	})
	tr := newTransport()
	oneShot := func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, srv.url(), nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader("{}")), 2 // no GetBody
		return req
	}
	for range 2 {
		resp, err := tr.RoundTrip(oneShot())
		g.Expect(err).NotTo(HaveOccurred())
		b, _ := io.ReadAll(resp.Body)
		g.Expect(string(b)).To(Equal("ok"))
		_ = resp.Body.Close()
		time.Sleep(1100 * time.Millisecond) // idle long enough to be checked
	}
	g.Expect(srv.conns.Load()).To(Equal(int32(2)))
}

// ReadHeld gives what was read from the socket, decoded, and never waits
// for more: a stream proxy takes a whole burst with it before it decides to
// flush (translate.SSEReader.WouldWait). At the body's end it reports io.EOF and
// lets the connection go, as Read does.
func TestReadHeldNeverWaits(t *testing.T) {
	g := NewWithT(t)
	var requests atomic.Int32
	srv := startRaw(t, func(int) []string {
		if requests.Add(1) == 1 { // a chunk and a half in the head's read, and then nothing
			return []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n3\r\nab"}
		}
		return []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"}
	})
	tr := newTransport()
	req, _ := http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	held, ok := resp.Body.(translate.HeldReader)
	g.Expect(ok).To(BeTrue())
	g.Expect(held.Held()).To(BeNumerically(">=", len("6\r\ndata:1\r\n3\r\nab")))
	buf := make([]byte, 64)
	n, err := held.ReadHeld(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("data:1ab"))
	got := make(chan int, 1)
	go func() { n, _ := held.ReadHeld(buf); got <- n }()
	g.Eventually(got).Should(Receive(Equal(0)), "nothing held: no wait for the rest of the chunk")
	g.Expect(held.Held()).To(BeZero())
	g.Expect(resp.Body.Close()).To(Succeed())

	req, _ = http.NewRequest(http.MethodPost, srv.url(), strings.NewReader("{}"))
	resp, err = tr.RoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	held = resp.Body.(translate.HeldReader)
	n, err = held.ReadHeld(buf)
	g.Expect(string(buf[:n])).To(Equal("ok"))
	g.Expect(err).To(Equal(io.EOF))
	g.Expect(resp.Body.Close()).To(Succeed())
	_, body, err := post(t, tr, srv.url(), "{}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal("ok"))
	g.Expect(srv.conns.Load()).To(Equal(int32(2)), "the connection read to its end with ReadHeld was reused (the first was closed)")
}
