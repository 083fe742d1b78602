package server

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelgate/modelgate/gateway/sockpeek"
)

// Detached is an HTTP/1.1 response taken off net/http's connection for the
// rest of its life: a long stream that mostly waits for its upstream.
//
// While a handler runs, net/http keeps for its connection a 4 KiB read
// buffer, a 4 KiB write buffer, a 2 KiB buffer before chunking and a
// background reader goroutine, and the connection's goroutine carries the
// handler's stack (8 KiB once a stream has started). A model that writes
// for minutes holds all of that while it waits. Detach hijacks the
// connection; the handler returns, so net/http lets go of its state, and the
// caller goes on with the stream on a goroutine of its own, writing chunks
// straight onto the connection. Finish ends the body and, when the
// connection can carry another request, waits for it (the idle timeout) and
// gives the connection back to the server, which serves it as newly
// accepted: keep-alive is kept.
//
// A Detached is used by one goroutine at a time.
type Detached struct {
	s      *Server
	conn   net.Conn
	header http.Header
	body   []byte // written, not sent yet
	err    error  // the first write error: the client is gone
	// prefix: bytes of the client's next request that net/http had read
	// ahead; they go back to the server with the connection.
	prefix []byte
	ctx    context.Context
	cancel context.CancelFunc
}

// maxUnsent bounds what Write keeps before it sends a chunk by itself, as
// net/http's own buffer does.
const maxUnsent = 32 << 10

// Detach takes a response off the server's connection goroutine (see
// Detached). Call it once net/http has sent the response's status and
// header and begun its chunked body (an HTTP/1.1 response without
// Content-Length, flushed), and only once the request's body has been read
// to its end; the handler must then return, and the caller goes on writing
// the body through the Detached and calls Finish. ok is false, and w
// untouched, when the response cannot be detached: HTTP/2 (its streams
// share a connection), a request that asked to close the connection, a
// server that is not serving or is draining.
func (s *Server) Detach(w http.ResponseWriter, r *http.Request) (d *Detached, ok bool) {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || r.Close || s.back.Load() == nil {
		return nil, false
	}
	if !s.detached.add() {
		return nil, false
	}
	header := w.Header()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.detached.done()
		return nil, false
	}
	d = &Detached{s: s, conn: conn, header: header}
	if n := rw.Reader.Buffered(); n > 0 {
		ahead, _ := rw.Peek(n)
		d.prefix = slices.Clone(ahead)
	}
	// The stream outlives the request: net/http cancels the request's
	// context when the handler returns. This one ends when the client is.
	d.ctx, d.cancel = context.WithCancel(context.WithoutCancel(r.Context()))
	return d, true
}

// Context carries the request's values and is canceled once a write fails:
// the client is gone.
func (d *Detached) Context() context.Context { return d.ctx }

// Header is the response's header: already sent, as after net/http's
// WriteHeader changing it changes nothing.
func (d *Detached) Header() http.Header { return d.header }

// WriteHeader does nothing: the status is sent.
func (d *Detached) WriteHeader(int) {}

// Write keeps p for the next chunk (Flush sends it).
func (d *Detached) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	d.body = append(d.body, p...)
	if len(d.body) > maxUnsent {
		if err := d.send(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError sends what was written as one chunk;
// http.ResponseController.Flush calls it.
func (d *Detached) FlushError() error { return d.send(false) }

// Finish ends the body. The connection then waits for the client's next
// request, on a goroutine of its own that holds nothing of the stream, and
// goes back to the server; or it is closed when it cannot carry one (a
// write failed, the server is draining, the idle timeout passed). The
// Detached is unusable afterwards.
func (d *Detached) Finish() {
	d.cancel()
	if d.send(true) != nil {
		d.Abort()
		return
	}
	d.body, d.header = nil, nil
	go d.handBack()
}

// handBack gives the connection back to the server once its next request
// comes (see Finish).
func (d *Detached) handBack() {
	defer d.s.detached.done()
	if !d.awaitNext() {
		_ = d.conn.Close()
		return
	}
	conn := withPrefix(d.conn, d.prefix)
	if back := d.s.back.Load(); back == nil || !back.giveBack(conn) {
		_ = d.conn.Close()
	}
}

// Abort closes the connection without ending the body: the client sees the
// response cut short, as when net/http recovers a handler's panic.
func (d *Detached) Abort() {
	defer d.s.detached.done()
	d.cancel()
	_ = d.conn.Close()
}

// awaitNext waits for the client's next request, within the idle timeout;
// false when none came or the server is draining.
func (d *Detached) awaitNext() bool {
	if len(d.prefix) > 0 {
		return d.s.detached.accepting()
	}
	if d.conn.SetReadDeadline(time.Now().Add(idleTimeout)) != nil || !d.s.detached.idle(d, true) {
		return false
	}
	first, ok := awaitReadable(d.conn)
	if !d.s.detached.idle(d, false) || !ok || d.conn.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	d.prefix = first
	return true
}

// awaitReadable waits until conn has bytes to read (or its read deadline
// passes). It leaves them in the socket where it can peek (unix); else it
// reads one byte, returned as first, which the server must be given first.
func awaitReadable(conn net.Conn) (first []byte, ok bool) {
	if st := sockpeek.Wait(conn); st != sockpeek.Unsupported {
		return nil, st == sockpeek.Data
	}
	var b [1]byte
	n, err := conn.Read(b[:])
	return b[:n], n == 1 && err == nil
}

// withPrefix is conn with prefix to be read first. A connection that a
// detached response had before is reused, not wrapped again, so that a
// connection carrying many streams does not read through a chain.
func withPrefix(conn net.Conn, prefix []byte) net.Conn {
	if len(prefix) == 0 {
		return conn
	}
	if p, ok := conn.(*prefixed); ok {
		p.prefix = append(prefix, p.prefix...) // what net/http had read ahead comes first
		return p
	}
	return &prefixed{Conn: conn, prefix: prefix}
}

// send writes the unsent body as one chunk, followed by the last chunk
// when last.
func (d *Detached) send(last bool) error {
	if d.err != nil {
		return d.err
	}
	if len(d.body) == 0 && !last {
		return nil
	}
	out := outBuffers.Get().(*[]byte)
	b := (*out)[:0]
	if len(d.body) > 0 {
		b = strconv.AppendInt(b, int64(len(d.body)), 16)
		b = append(b, "\r\n"...)
		b = append(b, d.body...)
		b = append(b, "\r\n"...)
		d.body = d.body[:0]
	}
	if last {
		b = append(b, "0\r\n\r\n"...)
	}
	_, err := d.conn.Write(b)
	if cap(b) <= 64<<10 {
		*out = b
		outBuffers.Put(out)
	}
	if err != nil {
		d.err = err
		d.cancel()
	}
	return err
}

// outBuffers hold a chunk while it is written, so that a waiting stream
// keeps no write buffer.
var outBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// prefixed is a connection with bytes already read from it in front.
type prefixed struct {
	net.Conn
	prefix []byte
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// CloseWrite half-closes, as net/http does to a TCP connection it ends.
func (p *prefixed) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// detachedSet counts the detached responses, so that shutdown waits for
// them, and knows which are idle (waiting for a next request), so that
// shutdown wakes them.
type detachedSet struct {
	mu       sync.Mutex
	draining bool
	idlers   map[*Detached]struct{}
	open     sync.WaitGroup
}

// add counts a new detached response; false once draining.
func (s *detachedSet) add() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.open.Add(1)
	return true
}

func (s *detachedSet) done() { s.open.Done() }

// accepting is false once draining: a finished stream's connection closes.
func (s *detachedSet) accepting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.draining
}

// idle marks d idle or busy; false when draining (d then closes).
func (s *detachedSet) idle(d *Detached, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !idle {
		delete(s.idlers, d)
		return !s.draining
	}
	if s.draining {
		return false
	}
	if s.idlers == nil {
		s.idlers = map[*Detached]struct{}{}
	}
	s.idlers[d] = struct{}{}
	return true
}

// drain refuses new detached responses and wakes the idle ones, which
// close their connections.
func (s *detachedSet) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	for d := range s.idlers {
		_ = d.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// wait waits for every detached response to finish, or for ctx.
func (s *detachedSet) wait(ctx context.Context) error {
	finished := make(chan struct{})
	go func() { s.open.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handback is the server's listener and the connections that detached
// responses give back: Serve accepts from both.
type handback struct {
	net.Listener
	accepted chan accepted
	back     chan net.Conn
	closed   chan struct{}
	close    sync.Once
}

type accepted struct {
	conn net.Conn
	err  error
}

func newHandback(ln net.Listener) *handback {
	h := &handback{Listener: ln, accepted: make(chan accepted), back: make(chan net.Conn), closed: make(chan struct{})}
	go h.acceptLoop()
	return h
}

// acceptLoop accepts from the listener until it fails for good (closed).
func (h *handback) acceptLoop() {
	for {
		conn, err := h.Listener.Accept()
		select {
		case h.accepted <- accepted{conn, err}:
		case <-h.closed:
			if conn != nil {
				_ = conn.Close()
			}
			return
		}
		if err != nil && !isTemporary(err) {
			return
		}
	}
}

// isTemporary is net/http's test of an Accept error worth retrying.
func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (h *handback) Accept() (net.Conn, error) {
	select {
	case a := <-h.accepted:
		return a.conn, a.err
	case c := <-h.back:
		return c, nil
	case <-h.closed:
		return nil, net.ErrClosed
	}
}

func (h *handback) Close() error {
	h.close.Do(func() { close(h.closed) })
	return h.Listener.Close()
}

// giveBack hands a connection to Serve; false once the listener is closed.
func (h *handback) giveBack(c net.Conn) bool {
	select {
	case h.back <- c:
		return true
	case <-h.closed:
		return false
	}
}
