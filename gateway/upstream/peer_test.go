package upstream_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// rawPeer is an upstream written at the TCP level, so that it can answer
// what no well-behaved HTTP server would: extra bytes after an answer,
// endless headers, a close instead of an answer. Each request is read
// whole (headers and body, unless the handler reads it itself) and handed
// to the handler with the connection; the handler writes whatever bytes
// the case needs and tells whether the connection goes on.
type rawPeer struct {
	ln       net.Listener
	conns    atomic.Int32 // connections accepted
	requests atomic.Int32 // requests read
	handle   func(c *peerConn, req *http.Request) (keep bool)
	wg       sync.WaitGroup
}

// peerConn is one accepted connection of a rawPeer.
type peerConn struct {
	net.Conn
	br *bufio.Reader
	// n is the number of requests read on this connection so far.
	n int
	// skipBody leaves the request body unread (the handler reads it, or
	// answers before it).
	skipBody bool
}

func newRawPeer(t testing.TB, handle func(c *peerConn, req *http.Request) bool) *rawPeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{ln: ln, handle: handle}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *rawPeer) URL() string { return "http://" + p.ln.Addr().String() }

func (p *rawPeer) accept() {
	defer p.wg.Done()
	var conns sync.WaitGroup
	var open sync.Map
	defer func() {
		open.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
		conns.Wait()
	}()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		open.Store(c, nil)
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer open.Delete(c)
			defer c.Close()
			p.serve(&peerConn{Conn: c, br: bufio.NewReader(c)})
		}()
	}
}

func (p *rawPeer) serve(c *peerConn) {
	for {
		c.skipBody = false
		req, err := http.ReadRequest(c.br)
		if err != nil {
			return
		}
		p.requests.Add(1)
		c.n++
		if !p.handle(c, req) {
			return
		}
		if !c.skipBody {
			_, _ = io.Copy(io.Discard, req.Body)
		}
	}
}

// answer is a complete HTTP/1.1 answer with a Content-Length body.
func answer(status int, body string, headers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return b.String()
}

// tenantBody is the answer a peer gives a request of tenant.
func tenantBody(tenant string) string { return fmt.Sprintf(`{"tenant":%q}`, tenant) }

// leak is what a peer sends that no request of the other tenant asked for:
// a whole second answer carrying the first tenant's data.
func leak(tenant string) string {
	return answer(http.StatusOK, fmt.Sprintf(`{"tenant":%q,"secret":"sk-live-%s"}`, tenant, strings.Repeat(tenant, 4)))
}
