// Package h1 is the gateway's HTTP/1.1 client for plain-HTTP upstreams (a
// model server on the cluster's network: vLLM, TGI, Ollama, a sidecar). It
// keeps a pool of keep-alive connections as net/http's Transport does, but a
// connection has no goroutine and no buffer of its own: the caller's
// goroutine writes the request and reads the answer, and a buffer from a
// pool is held only while bytes read from the socket wait to be consumed.
//
// An open stream through net/http's Transport holds its connection's read
// and write buffers and two goroutines (a reader and a writer, each with a
// stack) for its whole life: about 15 KiB of the gateway's memory per open
// stream, more than half of what the rest of the gateway holds for it
// (docs/performance.md, "Stop 34"). A waiting stream here holds the
// connection's socket and a few hundred bytes of state.
//
// What it does not serve goes to Transport.Next unchanged: HTTPS (HTTP/2 is
// negotiated there, and one connection carries many streams), a request
// through a proxy, a body of unknown length, a request with Expect or
// trailers, CONNECT.
package h1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Transport is an http.RoundTripper for plain-HTTP/1.1 requests.
type Transport struct {
	// Next serves the requests this transport does not (see the package
	// documentation); required.
	Next http.RoundTripper
	// DialContext opens connections; nil: a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy, if set, says whether a request goes through a proxy: such a
	// request goes to Next.
	Proxy func(*http.Request) (*url.URL, error)
	// MaxIdlePerHost bounds the idle connections kept per host (0: 2).
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle for longer (0: 90 s).
	IdleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn // per host:port, most recently used last
}

// RoundTrip sends req and returns the answer; the caller reads and closes
// its body, which gives the connection back for the next request.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.serves(req) {
		return t.Next.RoundTrip(req)
	}
	head, err := writeHead(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	defer putWriteBuf(head)
	addr := hostPort(req.URL)
	for attempt := 0; ; attempt++ {
		c, err := t.conn(req.Context(), addr)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.roundTrip(req, *head)
		if err == nil {
			return resp, nil
		}
		// A connection that sat idle may have been closed by the server
		// just as it was taken: with nothing of an answer read, the
		// request goes once more on a new connection, as net/http does.
		var nothing *nothingReadError
		if !c.reused || attempt > 0 || !errors.As(err, &nothing) || req.Context().Err() != nil {
			return nil, unwrapNothing(err)
		}
		if req, err = rewound(req); err != nil {
			return nil, err
		}
	}
}

// serves tells whether req is for this transport rather than Next.
func (t *Transport) serves(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || req.Method == http.MethodConnect {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0 {
		return false // unknown length: chunked request bodies are Next's
	}
	if len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 || req.Header.Get("Expect") != "" {
		return false
	}
	if t.Proxy != nil {
		if u, err := t.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// closeBody closes a request's body that will not be sent: a
// RoundTripper closes it, sent or not.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// rewound is req with a fresh copy of its body, for a second attempt.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("h1: connection closed before the answer, and the request body cannot be sent again")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	out := *req
	out.Body = body
	return &out, nil
}

// hostPort is the URL's host with its port (80 by default).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// conn takes an idle connection to addr or dials one.
func (t *Transport) conn(ctx context.Context, addr string) (*conn, error) {
	if c := t.takeIdle(addr); c != nil {
		return c, nil
	}
	dial := t.DialContext
	if dial == nil {
		dial = defaultDialer.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(t, addr, nc), nil
}

var defaultDialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// takeIdle returns the most recently used idle connection to addr that is
// still open, or nil.
func (t *Transport) takeIdle(addr string) *conn {
	for {
		t.mu.Lock()
		list := t.idle[addr]
		if len(list) == 0 {
			t.mu.Unlock()
			return nil
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		t.mu.Unlock()
		c.timer.Stop()
		if c.alive() {
			c.reused = true
			return c
		}
		_ = c.nc.Close()
	}
}

// putIdle keeps c for the next request to its host, or closes it.
func (t *Transport) putIdle(c *conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	list := t.idle[c.addr]
	if len(list) >= t.maxIdle() {
		t.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	t.idle[c.addr] = append(list, c)
	t.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(t.idleTimeout(), func() { t.expire(c) })
	} else {
		c.timer.Reset(t.idleTimeout())
	}
}

// expire closes c if it is still idle.
func (t *Transport) expire(c *conn) {
	t.mu.Lock()
	list := t.idle[c.addr]
	for i, x := range list {
		if x == c {
			t.idle[c.addr] = append(list[:i:i], list[i+1:]...)
			t.mu.Unlock()
			_ = c.nc.Close()
			return
		}
	}
	t.mu.Unlock() // taken meanwhile
}

// CloseIdleConnections closes the connections waiting for a request.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.timer.Stop()
			_ = c.nc.Close()
		}
	}
	if ci, ok := t.Next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (t *Transport) maxIdle() int {
	if t.MaxIdlePerHost > 0 {
		return t.MaxIdlePerHost
	}
	return 2
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return 90 * time.Second
}

// nothingReadError is a failure before any byte of the answer was read.
type nothingReadError struct{ err error }

func (e *nothingReadError) Error() string { return e.err.Error() }
func (e *nothingReadError) Unwrap() error { return e.err }

func unwrapNothing(err error) error {
	var nothing *nothingReadError
	if errors.As(err, &nothing) {
		return nothing.err
	}
	return err
}

// errBrokenConn wraps a failure to write or read on the connection.
func errBrokenConn(op string, err error) error {
	return fmt.Errorf("h1: %s: %w", op, err)
}
