package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/modelgate/modelgate/gateway/sockpeek"
)

// conn is one connection to an upstream.
type conn struct {
	t    *Transport
	addr string
	nc   net.Conn
	// raw reads the socket through the runtime's poller without a buffer
	// waiting in a read (nil: not a socket; nc.Read is used).
	raw syscall.RawConn
	rr  rawReader
	// reused: it served a request before; got: bytes of the current
	// answer read so far (none: a retry is safe).
	reused    bool
	got       int
	idleSince time.Time
	timer     *time.Timer
}

func newConn(t *Transport, addr string, nc net.Conn) *conn {
	c := &conn{t: t, addr: addr, nc: nc}
	c.rr.c = c
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return c
}

// aLongTimeAgo is a deadline that has passed: it wakes a blocked read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes req (its head already formatted) and reads the answer's
// head. The answer's body reads on from here (see body).
func (c *conn) roundTrip(req *http.Request, head []byte) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	c.got = 0
	if err := c.write(req, head); err != nil {
		return fail(err)
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(&c.rr)
	resp, err := readResponse(br, req)
	if err != nil {
		releaseReader(br)
		if c.got == 0 {
			err = &nothingReadError{errBrokenConn("read", err)}
		}
		return fail(err)
	}
	b := &body{c: c, stop: stop, ctx: ctx, keepAlive: !resp.Close && !req.Close}
	if n := br.Buffered(); n > 0 {
		b.buf = getReadBuf()
		ahead, _ := br.Peek(n)
		b.w = copy(*b.buf, ahead)
	}
	releaseReader(br)
	b.frame(req, resp)
	return resp, nil
}

// write sends the request: its head, then its body (in the same write
// when it is small; see sendAndAwait).
func (c *conn) write(req *http.Request, head []byte) error {
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody {
		defer req.Body.Close()
	}
	out := head
	var big bool
	if hasBody {
		if big = req.ContentLength > inlineBody; !big {
			n := len(out)
			out = append(out, make([]byte, req.ContentLength)...)
			if _, err := io.ReadFull(req.Body, out[n:]); err != nil {
				return errShortBody
			}
		}
	}
	if !big {
		return c.sendAndAwait(out)
	}
	if err := c.send(out); err != nil {
		return err
	}
	n, err := io.CopyN(c.nc, req.Body, req.ContentLength)
	if n < req.ContentLength && (err == nil || errors.Is(err, io.EOF)) {
		return errShortBody
	}
	if err != nil {
		return &nothingReadError{errBrokenConn("write", err)}
	}
	return nil
}

// send writes p through the connection (waiting while the socket's buffer
// is full).
func (c *conn) send(p []byte) error {
	if _, err := c.nc.Write(p); err != nil {
		return &nothingReadError{errBrokenConn("write", err)}
	}
	return nil
}

// inlineBody is the largest body sent in one write with its head.
const inlineBody = 64 << 10

var errShortBody = errors.New("h1: the request body is shorter than its ContentLength")

// readResponse reads an answer's head, past informational (1xx) answers.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("h1: unexpected 101 Switching Protocols")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// rawReader reads the connection for the head's bufio.Reader.
type rawReader struct{ c *conn }

func (r *rawReader) Read(p []byte) (int, error) {
	n, err := r.c.readInto(p)
	r.c.got += n
	return n, err
}

// readers are the bufio.Readers an answer's head is parsed from: what the
// head's read brought past it moves to the body, and the reader goes back.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

func releaseReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// readBufSize is the size of a read from the socket.
const readBufSize = 4 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

func getReadBuf() *[]byte { return readBufs.Get().(*[]byte) }

func putReadBuf(b *[]byte) { readBufs.Put(b) }

// writeBufs hold a request's head (and a small body) while it is written.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

func putWriteBuf(b *[]byte) {
	if cap(*b) <= inlineBody+(4<<10) {
		*b = (*b)[:0]
		writeBufs.Put(b)
	}
}

// opError is a failed socket read in net's shape (errors.Is finds the
// errno: connection reset, refused, ...).
func (c *conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: err}
}

// alive tells whether an idle connection is still open and quiet. One that
// sat idle for a second or more is checked (a server closes idle
// connections on its own schedule, 5 s for some); a fresher one is taken
// as it is, and a request that finds it closed is sent again (RoundTrip).
func (c *conn) alive() bool {
	if time.Since(c.idleSince) < time.Second {
		return true
	}
	switch sockpeek.Now(c.nc) {
	case sockpeek.Quiet, sockpeek.Unsupported:
		return true
	}
	return false // closed, or bytes nobody asked for
}

// readPooledPlain is readPooled through net.Conn.Read, which needs the
// buffer while it waits.
func readPooledPlain(c *conn) (*[]byte, int, error) {
	b := getReadBuf()
	n, err := c.nc.Read(*b)
	if n <= 0 {
		putReadBuf(b)
		return nil, 0, err
	}
	return b, n, err
}
