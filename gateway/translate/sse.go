package translate

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// SSEReader reads server-sent events. It is allocation-light: the Data of a
// returned Event aliases an internal buffer and is valid only until the next
// call to Next.
type SSEReader struct {
	src io.Reader
	// buf holds what was read and not yet consumed, buf[r:w]; err is the
	// read error that ended src (returned once buf is consumed). buf is
	// wait while the reader waits for the upstream with nothing unread, and
	// a pooled sseBufSize buffer (big) while there is more to read.
	buf  []byte
	big  *[]byte
	wait [sseWaitSize]byte
	r, w int
	err  error
	// empty counts reads in a row that returned nothing.
	empty int

	data []byte
	line []byte
	// rest is what follows a lone CR in the last line read: more lines,
	// returned before the next read.
	rest    []byte
	hasRest bool
}

// The SSE reader's buffers. A stream waits for its upstream most of its
// life, so what it holds while it waits is what an open stream costs: a
// read that finds nothing unread goes into the reader's own sseWaitSize
// bytes, and only what follows it in a burst is read into a pooled
// sseBufSize buffer, returned to the pool once consumed. WouldWait sees a burst
// of up to 1 KiB (a few deltas) whole when it decides whether to flush, and
// a larger one (up to the transport's 4 KiB) costs one flush more: 256
// bytes, tried, flushed after the first event of most bursts. A longer line
// is gathered across reads by readLine.
const (
	sseWaitSize = 1 << 10
	sseBufSize  = 4 << 10
)

var sseBufs = sync.Pool{New: func() any { b := make([]byte, sseBufSize); return &b }}

// NewSSEReader returns a reader of the events in r. The buffering is this
// type's own rather than a bufio.Reader's: a stream's goroutine waits in a
// read under it for the stream's whole life, and one frame less there helps
// keep that goroutine's stack within 8 KiB (see handlers.Text.serveHTTP).
func NewSSEReader(r io.Reader) *SSEReader {
	s := &SSEReader{src: r}
	s.buf = s.wait[:]
	return s
}

var knownEventNames = map[string]string{}

func init() {
	for _, n := range []string{
		"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop", "ping", "error",
		"response.created", "response.in_progress", "response.completed", "response.incomplete",
		"response.failed", "response.output_item.added", "response.output_item.done",
		"response.content_part.added", "response.content_part.done", "response.output_text.delta",
		"response.output_text.done", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.added",
		"response.reasoning_summary_part.done", "response.refusal.delta", "response.refusal.done",
	} {
		knownEventNames[n] = n
	}
}

func eventName(b []byte) string {
	if n, ok := knownEventNames[string(b)]; ok {
		return n
	}
	return string(b)
}

// Next returns the next event with a data field. It returns io.EOF after the
// last event, and io.ErrUnexpectedEOF when the stream ends inside an event
// that has no data.
func (s *SSEReader) Next() (Event, error) {
	s.data = s.data[:0]
	var name string
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasData {
				return Event{Name: name, Data: s.data}, nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if hasData {
				return Event{Name: name, Data: s.data}, nil
			}
			name = ""
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		case "event":
			name = eventName(value)
		}
	}
}

// WouldWait reports whether Next would wait for the underlying reader: no
// complete event is held and the reader has not ended. A stream
// proxy flushes only then, so a burst of events leaves in one write, and
// the last events of a stream leave with whatever follows the end.
func (s *SSEReader) WouldWait() bool {
	event, ended := s.look()
	return !event && !ended
}

// look reports whether the reader holds a complete event with a data
// field, so that Next returns it without reading from the underlying
// reader, and whether that reader ended.
func (s *SSEReader) look() (event, ended bool) {
	if s.holdsEvent() {
		return true, false
	}
	return false, s.err != nil
}

// holdsEvent tells whether buf holds a complete event with a data field.
func (s *SSEReader) holdsEvent() bool {
	b := s.buf[s.r:s.w]
	hasData := false
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false // the rest is an incomplete line
		}
		line := bytes.TrimSuffix(b[:i], []byte{'\r'})
		b = b[i+1:]
		switch {
		case len(line) == 0:
			if hasData {
				return true
			}
		case bytes.HasPrefix(line, []byte("data")) && (len(line) == 4 || line[4] == ':'):
			hasData = true
		}
	}
}

// readLine returns one line without its terminator; the slice is valid until
// the next read. Lines end at LF, CRLF or a lone CR, as the SSE
// specification has it.
func (s *SSEReader) readLine() ([]byte, error) {
	if s.hasRest {
		return s.splitCR(s.rest), nil
	}
	long := false // the line so far is in s.line: longer than buf
	for {
		if i := bytes.IndexByte(s.buf[s.r:s.w], '\n'); i >= 0 {
			line := s.buf[s.r : s.r+i]
			s.r += i + 1
			return s.splitCR(s.lineEnd(line, long)), nil
		}
		if s.err != nil {
			line := s.buf[s.r:s.w]
			s.r = s.w
			if s.err != io.EOF || (len(line) == 0 && !long) {
				return nil, s.err
			}
			return s.splitCR(s.lineEnd(line, long)), nil
		}
		if s.r == 0 && s.w == sseBufSize && s.big != nil { // a line longer than buf
			if !long {
				s.line = s.line[:0]
			}
			s.line, s.w, long = append(s.line, s.buf...), 0, true
		}
		s.fill()
	}
}

// lineEnd is a line's last part with the part gathered before it, if any,
// and without its CR.
func (s *SSEReader) lineEnd(part []byte, long bool) []byte {
	if long {
		s.line = append(s.line, part...)
		part = s.line
	}
	return bytes.TrimSuffix(part, []byte{'\r'})
}

// fill reads once into buf, after what is unread. A reader that keeps
// returning nothing is an error, as bufio has it.
func (s *SSEReader) fill() {
	s.makeRoom()
	n, err := s.src.Read(s.buf[s.w:])
	s.w += n
	switch {
	case err != nil:
		s.err = err
	case n > 0:
		s.empty = 0
	default:
		if s.empty++; s.empty >= 100 {
			s.err = io.ErrNoProgress
		}
	}
}

// makeRoom readies buf for a read: the wait buffer when nothing is unread
// (the big one goes back to the pool: no line read from it is in use any
// more), else the big one with the unread bytes at its start.
func (s *SSEReader) makeRoom() {
	switch {
	case s.r == s.w:
		s.r, s.w = 0, 0
		if s.big != nil {
			sseBufs.Put(s.big)
			s.big, s.buf = nil, s.wait[:]
		}
	case s.big == nil:
		s.takeBig()
	case s.r > 0:
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
}

// takeBig moves what is unread from the wait buffer to the start of a
// pooled one.
func (s *SSEReader) takeBig() {
	s.big = sseBufs.Get().(*[]byte)
	s.w = copy(*s.big, s.buf[s.r:s.w])
	s.r, s.buf = 0, *s.big
}

// errReleased is what a released reader returns.
var errReleased = errors.New("translate: SSE reader released")

// Release gives the reader's pooled buffer back, if it holds one: a stream
// that ends in a burst ends holding it, and without this every such stream
// would leave 4 KiB to the collector instead of to the next stream. The
// Data of the last Event returned is invalid from here on, and Next
// returns an error.
func (s *SSEReader) Release() {
	if s.big != nil {
		sseBufs.Put(s.big)
	}
	s.big, s.buf, s.r, s.w = nil, s.wait[:], 0, 0
	s.rest, s.hasRest, s.line, s.data = nil, false, nil, nil
	s.err = errReleased
}

// splitCR returns line up to its first CR and keeps the rest for the next
// readLine (no read happens in between, so the slice stays valid).
func (s *SSEReader) splitCR(line []byte) []byte {
	i := bytes.IndexByte(line, '\r')
	if i < 0 {
		s.rest, s.hasRest = nil, false
		return line
	}
	s.rest, s.hasRest = line[i+1:], true
	return line[:i]
}
