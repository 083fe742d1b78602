package h1

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"sync/atomic"
)

// body reads an answer's body off its connection: length-delimited,
// chunked, or up to the connection's end. Bytes read from the socket wait
// in a pooled buffer until consumed, and the buffer goes back to the pool
// before the next wait. At the body's end the connection goes back to the
// transport's pool (or is closed, when it cannot carry another request).
type body struct {
	c    *conn
	stop func() bool // ends the context's watch on the connection
	ctx  context.Context
	// keepAlive: the connection may carry another request after this one.
	keepAlive bool

	mode      framing
	remaining int64 // length: bytes left; chunked: bytes left of the chunk
	chunk     chunkState
	line      []byte // a chunk line begun in an earlier read

	buf  *[]byte // bytes read and not yet consumed: (*buf)[r:w]
	r, w int
	err  error // sticky: io.EOF at the end

	state atomic.Int32
}

type framing int8

const (
	byLength framing = iota
	chunked
	toClose
)

type chunkState int8

const (
	chunkSize    chunkState = iota // the size line
	chunkData                      // remaining bytes of data
	chunkDataEnd                   // the CRLF after the data
	chunkTrailer                   // trailer fields up to an empty line
)

const (
	open int32 = iota
	released
	closed
)

// maxChunkLine bounds a chunk's size line (with extensions) and a trailer
// field.
const maxChunkLine = 4 << 10

var errClosedBody = errors.New("http: read on closed response body")

// frame sets resp's body from its framing; an answer without one gives
// its connection back at once.
func (b *body) frame(req *http.Request, resp *http.Response) {
	switch {
	case resp.Body == http.NoBody || req.Method == http.MethodHead:
		b.err = io.EOF
		b.done()
		resp.Body = http.NoBody
		return
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		b.mode = chunked
	case resp.ContentLength >= 0:
		b.mode, b.remaining = byLength, resp.ContentLength
	default:
		b.mode, b.keepAlive = toClose, false
	}
	resp.Body = b
}

// Read reads the body's next bytes: what is held, else after a wait.
func (b *body) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return b.ReadHeld(p)
	}
	for {
		n, err := b.ReadHeld(p)
		if err != nil || n > 0 {
			return n, err
		}
		if b.mode != chunked && len(p) >= readBufSize {
			return b.readDirect(p)
		}
		if err := b.fill(); err != nil {
			return 0, b.fail(err)
		}
	}
}

// Held is how many bytes were read from the socket and not yet consumed:
// at least what ReadHeld gives (chunk framing is counted too).
func (b *body) Held() int { return len(b.buffered()) }

// ReadHeld reads what the body can give without reading the socket: what
// is buffered, decoded as Read would; 0 when Read would have to wait. A
// stream proxy takes a whole burst with it before deciding to flush
// (translate.SSEReader.WouldWait).
func (b *body) ReadHeld(p []byte) (int, error) {
	if b.state.Load() == closed {
		return 0, errClosedBody
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.decode(p)
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

// decode moves what is buffered into p, as the framing has it; at the
// body's end it sets b.err to io.EOF and lets the connection go.
func (b *body) decode(p []byte) (int, error) {
	switch b.mode {
	case byLength:
		if b.remaining == 0 {
			return 0, b.end()
		}
		n := copy(p[:min(int64(len(p)), b.remaining)], b.buffered())
		b.r += n
		if b.remaining -= int64(n); b.remaining == 0 {
			return n, b.end()
		}
		return n, nil
	case toClose:
		n := copy(p, b.buffered())
		b.r += n
		return n, nil
	}
	return b.decodeChunked(p)
}

// buffered is what was read from the socket and not yet consumed.
func (b *body) buffered() []byte {
	if b.buf == nil {
		return nil
	}
	return (*b.buf)[b.r:b.w]
}

// decodeChunked moves chunk data from the buffer into p, past the chunks'
// size lines and CRLFs, up to the last chunk and its trailer.
func (b *body) decodeChunked(p []byte) (int, error) {
	n := 0
	for b.r < b.w && n < len(p) {
		switch b.chunk {
		case chunkData:
			k := copy(p[n:min(int64(len(p)), int64(n)+b.remaining)], b.buffered())
			n, b.r = n+k, b.r+k
			if b.remaining -= int64(k); b.remaining == 0 {
				b.chunk = chunkDataEnd
			}
			continue
		}
		line, ok, err := b.nextLine()
		if err != nil || !ok {
			return n, err
		}
		switch b.chunk {
		case chunkSize:
			size, err := parseChunkSize(line)
			if err != nil {
				return n, err
			}
			b.remaining, b.chunk = size, chunkData
			if size == 0 {
				b.chunk = chunkTrailer
			}
		case chunkDataEnd:
			if string(line) != "\r" {
				return n, errMalformedChunk
			}
			b.chunk = chunkSize
		case chunkTrailer: // header fields up to an empty line
			line = bytes.TrimSuffix(line, []byte{'\r'})
			if len(line) == 0 { // the end
				return n, b.end()
			} // a field: ignored (no caller reads a trailer)
		}
	}
	return n, nil
}

var errMalformedChunk = errors.New("h1: malformed chunked encoding")

// nextLine returns the next line from the buffer without its LF (a CR
// before it stays); ok is false when the line goes on past what was read (kept in
// b.line for the next read).
func (b *body) nextLine() (line []byte, ok bool, err error) {
	buffered := b.buffered()
	i := bytes.IndexByte(buffered, '\n')
	if i < 0 {
		if len(b.line)+len(buffered) > maxChunkLine {
			return nil, false, errMalformedChunk
		}
		b.line = append(b.line, buffered...)
		b.r = b.w
		return nil, false, nil
	}
	line = buffered[:i]
	b.r += i + 1
	if len(b.line) > 0 {
		if len(b.line)+len(line) > maxChunkLine {
			return nil, false, errMalformedChunk
		}
		line = append(b.line, line...)
		b.line = b.line[:0]
	}
	return line, true, nil
}

// parseChunkSize reads a chunk's size line as net/http does: CRLF at its
// end and no CR before, trailing white space, then extensions (ignored)
// after ';', then at most 16 hexadecimal digits.
func parseChunkSize(line []byte) (int64, error) {
	if i := bytes.IndexByte(line, '\r'); i != len(line)-1 || i < 0 {
		return 0, errMalformedChunk
	}
	line = bytes.TrimRight(line, " \t\r")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || len(line) > 16 {
		return 0, errMalformedChunk
	}
	var size uint64
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, errMalformedChunk
		}
		size = size<<4 | uint64(c)
	}
	if size > math.MaxInt64 {
		return 0, errMalformedChunk
	}
	return int64(size), nil
}

// fill reads the socket once, when everything buffered was consumed: the
// pooled buffer goes back first, and a new one is taken only once bytes
// arrive.
func (b *body) fill() error {
	if b.buf != nil {
		putReadBuf(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
	buf, n, err := b.c.readPooled()
	if n > 0 {
		b.buf, b.w = buf, n
		return nil
	}
	if errors.Is(err, io.EOF) {
		if b.mode == toClose {
			return b.end()
		}
		return io.ErrUnexpectedEOF
	}
	return err
}

// readDirect reads a length- or close-delimited body straight into p when
// nothing is buffered and p is as large as a pooled buffer.
func (b *body) readDirect(p []byte) (int, error) {
	if b.buf != nil {
		putReadBuf(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
	if b.mode == byLength {
		p = p[:min(int64(len(p)), b.remaining)]
	}
	n, err := b.c.readInto(p)
	switch {
	case errors.Is(err, io.EOF) && b.mode == toClose:
		return n, b.end()
	case errors.Is(err, io.EOF):
		return n, b.fail(io.ErrUnexpectedEOF)
	case err != nil:
		return n, b.fail(err)
	}
	if b.mode == byLength {
		if b.remaining -= int64(n); b.remaining == 0 {
			return n, b.end()
		}
	}
	return n, nil
}

// end marks the body read to its end and lets the connection go: back to
// the pool if it can carry another request, else closed.
func (b *body) end() error {
	b.err = io.EOF
	b.done()
	return io.EOF
}

// done gives the connection back once the answer was read to its end.
func (b *body) done() {
	if !b.state.CompareAndSwap(open, released) {
		return
	}
	extra := b.r < b.w // bytes past the answer: the connection is not in step
	if b.buf != nil {
		putReadBuf(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
	if b.keepAlive && !extra && b.stop() {
		b.c.t.putIdle(b.c)
		return
	}
	b.stop()
	_ = b.c.nc.Close()
}

// fail ends the body with err (the context's error when it was the
// context that ended the read) and closes the connection.
func (b *body) fail(err error) error {
	if err == io.EOF {
		return err // end set it
	}
	if b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	b.err = err
	if b.state.CompareAndSwap(open, closed) {
		b.stop()
		_ = b.c.nc.Close()
	}
	return err
}

// Close closes the body; a body not read to its end closes its
// connection (what is left of the answer is not read).
func (b *body) Close() error {
	if b.state.CompareAndSwap(open, closed) {
		b.stop()
		_ = b.c.nc.Close()
	}
	return nil
}
