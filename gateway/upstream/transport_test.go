package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// The cases below hold the gateway's upstream client (Egress.API on
// NewTransport, the transport every adapter uses) against upstreams that
// break HTTP/1.1 on purpose. The expectations are net/http's: whatever
// replaces the transport must keep every one of them.

// client is one process's upstream client: every case shares its pool, as
// every tenant's request does in the gateway.
var client = upstream.NewEgress(upstream.EgressOptions{ResponseHeaderTimeout: upstream.DefaultResponseHeaderTimeout}).API

// call sends one request of tenant through the gateway's client and returns
// the answer's status and body.
func call(ctx context.Context, method, url, tenant string, body io.Reader) (int, string, error) {
	return callWith(ctx, client, method, url, tenant, body)
}

func callWith(ctx context.Context, client *http.Client, method, url, tenant string, body io.Reader) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Tenant", tenant)
	resp, err := upstream.RoundTrip(client, req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// ownAnswers sends first's request, waits gap, sends second's, and checks
// that each got the answer sent for it: never the bytes the peer wrote
// after first's answer, whatever the gap.
func ownAnswers(t *testing.T, p *rawPeer, method, first, second string, gap time.Duration) {
	g := NewWithT(t)
	ctx := context.Background()
	status, body, err := call(ctx, method, p.URL(), first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(BeNumerically("<", 400))
	if method != http.MethodHead && status != http.StatusNoContent && status != http.StatusNotModified {
		g.Expect(body).To(HavePrefix(tenantBody(first)[:len(tenantBody(first))-1]))
	}
	time.Sleep(gap)
	status, body, err = call(ctx, http.MethodGet, p.URL(), second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal(tenantBody(second)), "the second request got bytes it was not sent for")
}

// An answer followed, in a later write, by bytes nobody asked for (here a
// whole answer carrying the first tenant's data): the connection must not
// carry them to the next request, whichever tenant comes first and however
// long the connection was idle.
func TestUnsolicitedAnswerNeverReachesTheNextRequest(t *testing.T) {
	t.Parallel()
	for _, gap := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond,
		950 * time.Millisecond, 1100 * time.Millisecond, 2 * time.Second} {
		for _, order := range [][2]string{{"A", "B"}, {"B", "A"}} {
			t.Run(fmt.Sprintf("%s-then-%s-%s", order[0], order[1], gap), func(t *testing.T) {
				t.Parallel()
				p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
					tenant := req.Header.Get("X-Tenant")
					if _, err := io.WriteString(c, answer(http.StatusOK, tenantBody(tenant))); err != nil {
						return false
					}
					time.Sleep(2 * time.Millisecond) // its own write, after the answer has left
					_, err := io.WriteString(c, leak(tenant))
					return err == nil
				})
				ownAnswers(t, p, http.MethodGet, order[0], order[1], gap)
			})
		}
	}
}

// Bytes after a complete answer in the same write: a body on a bodiless
// answer (204, 304, HEAD), more than Content-Length said (a length counted
// in runes, not bytes), or a second answer behind a large body.
func TestBytesBeyondAnAnswerNeverReachTheNextRequest(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 10<<10)
	cases := []struct {
		name   string
		method string
		reply  func(tenant string) string
	}{
		{"204-with-a-body", http.MethodGet, func(tn string) string {
			return "HTTP/1.1 204 No Content\r\n\r\n" + leak(tn)
		}},
		{"304-with-a-body", http.MethodGet, func(tn string) string {
			return "HTTP/1.1 304 Not Modified\r\n\r\n" + leak(tn)
		}},
		{"HEAD-answered-with-a-body", http.MethodHead, func(tn string) string {
			body := leak(tn)
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}},
		{"length-in-runes", http.MethodGet, func(tn string) string {
			body := fmt.Sprintf(`{"tenant":%q,"note":"Grüße, ünïcödé","secret":"sk-live-%s"}`, tn, strings.Repeat(tn, 4))
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len([]rune(body)), body)
		}},
		{"second-answer-after-10kB", http.MethodGet, func(tn string) string {
			body := tenantBody(tn)[:len(tenantBody(tn))-1] + `,"pad":"` + big + `"}`
			return answer(http.StatusOK, body) + leak(tn)
		}},
	}
	for _, tc := range cases {
		for _, gap := range []time.Duration{20 * time.Millisecond, time.Second} {
			t.Run(fmt.Sprintf("%s-%s", tc.name, gap), func(t *testing.T) {
				t.Parallel()
				p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
					tenant := req.Header.Get("X-Tenant")
					reply := tc.reply(tenant)
					if tenant != "A" { // only the first tenant's answer misbehaves
						reply = answer(http.StatusOK, tenantBody(tenant))
					}
					_, err := io.WriteString(c, reply)
					return err == nil
				})
				ownAnswers(t, p, tc.method, "A", "B", gap)
			})
		}
	}
}

// Many requests at once over a small pool of keep-alive connections, under
// the race detector in CI: each answer is its own request's, and nothing
// panics or leaks a connection.
func TestConcurrentRequestsOverAPooledUpstream(t *testing.T) {
	t.Parallel()
	p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
		_, err := io.WriteString(c, answer(http.StatusOK, tenantBody(req.Header.Get("X-Tenant"))))
		return err == nil
	})
	g := NewWithT(t)
	var wrong, failed, done atomic.Int32
	var wg sync.WaitGroup
	until := time.Now().Add(time.Second)
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(until); i++ {
				tenant := fmt.Sprintf("w%d-%d", w, i)
				_, body, err := call(context.Background(), http.MethodPost, p.URL(), tenant, strings.NewReader(`{"model":"m"}`))
				switch {
				case err != nil:
					failed.Add(1)
				case body != tenantBody(tenant):
					wrong.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	g.Expect(wrong.Load()).To(BeZero(), "answers delivered to the wrong request")
	g.Expect(failed.Load()).To(BeZero())
	g.Expect(done.Load()).To(Equal(p.requests.Load()), "every request reached the upstream once")
}

// A reused connection that closes after reading a POST, without an
// answer: the POST is not sent again (a model call is not idempotent, a
// second one is a second charge upstream).
func TestPostIsNotReplayedAfterTheUpstreamReadIt(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
		if c.n == 2 {
			_, _ = io.Copy(io.Discard, req.Body)
			return false // read, then closed without an answer
		}
		_, err := io.WriteString(c, answer(http.StatusOK, tenantBody(req.Header.Get("X-Tenant"))))
		return err == nil
	})
	_, body, err := call(context.Background(), http.MethodPost, p.URL(), "A", strings.NewReader(`{"n":1}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal(tenantBody("A")))
	_, _, err = call(context.Background(), http.MethodPost, p.URL(), "B", strings.NewReader(`{"n":2}`))
	g.Expect(err).To(HaveOccurred())
	g.Expect(p.requests.Load()).To(BeEquivalentTo(2), "the upstream read the second POST more than once")
}

// An upstream that refuses a large body before reading it: the client gets
// the refusal, not a connection error, and nothing is resent. The upstream
// either closes its side at once and discards what still comes (a
// lingering close, as HTTP servers do so that a reset does not destroy
// their answer), or stops reading and waits.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	t.Parallel()
	for _, linger := range []bool{true, false} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			release := make(chan struct{})
			p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
				c.skipBody = true
				_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
				if linger {
					_ = c.Conn.(*net.TCPConn).CloseWrite()
					_, _ = io.Copy(io.Discard, c.br)
					return false
				}
				<-release
				return false
			})
			defer close(release)
			status, _, err := call(context.Background(), http.MethodPost, p.URL(), "A", bytes.NewReader(make([]byte, 32<<20)))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusRequestEntityTooLarge))
			g.Expect(p.requests.Load()).To(BeEquivalentTo(1))
		})
	}
}

// Response headers past upstream.MaxResponseHeaderBytes fail the call, and
// the heap does not grow with what the upstream sends: one 64 MiB header
// value, 64 MiB of short header lines, and endless 1xx answers. Not
// parallel: the allocation figure is the process's.
func TestResponseHeadersAreCapped(t *testing.T) {
	cases := map[string]func(w io.Writer) error{
		"one-64MiB-value": func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: "); err != nil {
				return err
			}
			return repeat(w, bytes.Repeat([]byte("a"), 32<<10), 64<<20)
		},
		"64MiB-of-short-lines": func(w io.Writer) error {
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\n"); err != nil {
				return err
			}
			return repeat(w, bytes.Repeat([]byte("X-H: v\r\n"), 4<<10), 64<<20)
		},
		"endless-1xx": func(w io.Writer) error {
			return repeat(w, bytes.Repeat([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"), 512), 1<<40)
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var sent atomic.Int64
			p := newRawPeer(t, func(c *peerConn, _ *http.Request) bool {
				_ = send(countingWriter{c, &sent})
				return false
			})
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, err := call(ctx, http.MethodGet, p.URL(), "A", nil)
			runtime.ReadMemStats(&after)
			g.Expect(err).To(HaveOccurred())
			g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the call ended at its deadline, not at the header cap")
			allocated := after.TotalAlloc - before.TotalAlloc
			// A reader without a cap allocates at least what it is sent (64 MiB).
			g.Expect(allocated).To(BeNumerically("<", 32<<20), "bytes allocated while reading the headers")
			t.Logf("upstream sent %d bytes before the client gave up; %d bytes allocated", sent.Load(), allocated)
		})
	}
}

// repeat writes chunk to w until n bytes are written or a write fails.
func repeat(w io.Writer, chunk []byte, n int64) error {
	for sent := int64(0); sent < n; sent += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// A URL whose query or opaque part carries control characters is refused
// before anything is written: the upstream would read two requests.
func TestControlCharactersInTheURLAreRefused(t *testing.T) {
	t.Parallel()
	p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
		_, err := io.WriteString(c, answer(http.StatusOK, tenantBody("x")))
		return err == nil
	})
	smuggled := "\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x"
	for _, set := range []func(u *url.URL){
		func(u *url.URL) { u.RawQuery = "a=1" + smuggled },
		func(u *url.URL) { u.Opaque = "//" + u.Host + "/v1/messages" + smuggled },
	} {
		g := NewWithT(t)
		u, err := url.Parse(p.URL() + "/v1/messages")
		g.Expect(err).NotTo(HaveOccurred())
		set(u)
		req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}
		_, err = upstream.RoundTrip(client, req)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("control character"))
	}
	NewWithT(t).Expect(p.requests.Load()).To(BeZero())
}

// Framing that a lenient reader gets wrong: each answer is read as
// net/http reads it (an error where it refuses), and the next request on
// the connection still gets its own answer.
func TestAmbiguousFraming(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, reply string
		wantBody    string // "" with wantErr
		wantErr     string
	}{
		{name: "length-and-chunked", reply: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", wantBody: "abc"},
		{name: "two-lengths", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", wantErr: "multiple Content-Length"},
		{name: "negative-length", reply: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc", wantErr: "bad Content-Length"},
		{name: "obs-fold", reply: "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok"},
		{name: "bad-chunk-size", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", wantErr: "invalid byte in chunk length"},
		{name: "huge-chunk-size", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nabc\r\n0\r\n\r\n", wantErr: "chunk length too large"},
		{name: "http-1.0-until-close", reply: "HTTP/1.0 200 OK\r\n\r\nuntil the close", wantBody: "until the close"},
		{name: "connection-close", reply: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := newRawPeer(t, func(c *peerConn, req *http.Request) bool {
				if req.Header.Get("X-Tenant") == "A" {
					_, _ = io.WriteString(c, tc.reply)
					return !strings.Contains(tc.reply, "HTTP/1.0") && !strings.Contains(tc.reply, "Connection: close")
				}
				_, err := io.WriteString(c, answer(http.StatusOK, tenantBody(req.Header.Get("X-Tenant"))))
				return err == nil
			})
			_, body, err := call(context.Background(), http.MethodGet, p.URL(), "A", nil)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(body).To(Equal(tc.wantBody))
			}
			_, body, err = call(context.Background(), http.MethodGet, p.URL(), "B", nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(body).To(Equal(tenantBody("B")))
		})
	}
}

// An upstream that takes the request and never answers: the transport's
// response-header timeout ends the call even when its context sets no
// deadline.
func TestSilentUpstreamHitsTheResponseHeaderTimeout(t *testing.T) {
	g := NewWithT(t)
	quit := make(chan struct{})
	p := newRawPeer(t, func(*peerConn, *http.Request) bool {
		<-quit
		return false
	})
	defer close(quit)
	short := upstream.NewEgress(upstream.EgressOptions{ResponseHeaderTimeout: 200 * time.Millisecond}).API
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := callWith(ctx, short, http.MethodGet, p.URL(), "A", nil)
	g.Expect(err).To(MatchError(ContainSubstring("timeout awaiting response headers")))
	g.Expect(ctx.Err()).NotTo(HaveOccurred())
	var ne net.Error
	g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeTrue())
}
