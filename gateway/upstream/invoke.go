package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/translate"
)

const maxErrorBody = 64 << 10

// Result is a successful upstream call, in the client's protocol.
type Result struct {
	// Upstream is the protocol spoken with the upstream.
	Upstream Protocol
	// Translated tells whether the request and answer were translated.
	Translated bool
	// Body is the complete answer of a non-streaming call.
	Body []byte
	// Usage is the usage of a non-streaming call (for streams see
	// Stream.Usage).
	Usage Usage
	// UsageReported tells whether the upstream reported Usage.
	UsageReported bool
	// Stream is set for a streaming call.
	Stream *Stream

	cancel context.CancelFunc
}

// Close releases the upstream connection. It is safe to call more than once.
func (r *Result) Close() error {
	if r == nil {
		return nil
	}
	var err error
	if r.Stream != nil {
		err = r.Stream.Close()
	}
	if r.cancel != nil {
		r.cancel()
	}
	return err
}

// Invoke sends the client's request to backend b through provider p and
// returns the answer in the client's protocol.
//
// The upstream protocol is the client's when p speaks it (then the body is
// forwarded byte for byte except for the model field), else p's first
// protocol (then the request and the answer are translated). Errors before
// any byte reached the client are *Error; a cancelled ctx returns
// ctx.Err().
func Invoke(ctx context.Context, p TextProvider, b Backend, req Request) (*Result, error) {
	client := req.Protocol
	if !client.Valid() {
		return nil, fmt.Errorf("upstream: unknown client protocol %q", client)
	}
	up := UpstreamProtocolFor(p, b, client)
	clientModel := req.Model
	if clientModel == "" {
		clientModel, _ = translate.FieldString(req.Body, "model")
	}
	includeUsage := false
	if client == ChatCompletions && req.Stream {
		raw, _ := translate.FieldRaw(req.Body, "stream_options", "include_usage")
		includeUsage = string(raw) == "true"
	}

	body, tools, err := upstreamBody(client, up, req, b.UpstreamModel, includeUsage)
	if err != nil {
		return nil, textError(http.StatusBadRequest, false, err.Error(), err)
	}

	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	fail := func(err error) (*Result, error) {
		timer.Stop()
		cancel()
		return nil, err
	}
	transportErr := func(err error) error {
		if timedOut.Load() {
			return textError(http.StatusGatewayTimeout, true, "upstream timed out", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return textError(http.StatusBadGateway, true, "upstream connection failed", err)
	}

	sendCtx := cctx
	if up == client {
		sendCtx = withClientQuery(cctx, req.Query)
	}
	resp, err := p.Send(sendCtx, b, up, body, req.Stream, req.Header)
	if err != nil {
		// A provider may classify its own failure before the request left
		// (a backend it cannot use: no region, no credential, a credential
		// it could not exchange for a token); the rest are the transport's.
		return fail(transportErrOr(err, transportErr))
	}
	if resp.StatusCode >= 300 {
		eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		ue := textStatusError(resp.StatusCode, eb)
		ue.Protocol = up
		// Text calls keep the upstream's wait too: the handler holds the
		// backend behind the others for it.
		ue.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return fail(ue)
	}

	res := &Result{Upstream: up, Translated: up != client, cancel: cancel}
	if req.Stream && isEventStream(resp) {
		s := newStream(resp.Body, up, client, clientModel, translate.StreamOptions{IncludeUsage: includeUsage, Tools: tools}, cancel)
		// Read the first event now, still under the timeout: an upstream
		// that fails right away (an error event before any content) can
		// still be retried.
		if err := s.prime(); err != nil {
			s.Close()
			return fail(transportErrOr(err, transportErr))
		}
		if !timer.Stop() {
			s.Close()
			return fail(transportErr(context.DeadlineExceeded))
		}
		res.Stream = s
		return res, nil
	}

	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	timer.Stop()
	if err != nil {
		return fail(transportErr(err))
	}
	if !req.Stream {
		cancel() // the body is read; nothing to hold on to
		res.cancel = nil
	}
	if req.Stream {
		// The upstream answered a stream request with a complete body:
		// replay it as a stream of the client's protocol.
		s, err := streamFromBody(raw, up, client, clientModel, translate.StreamOptions{IncludeUsage: includeUsage, Tools: tools}, cancel)
		if err != nil {
			return fail(textError(http.StatusBadGateway, true, "upstream sent an unreadable response", err))
		}
		res.Stream = s
		return res, nil
	}
	if up == client {
		res.Usage, res.UsageReported = translate.ResponseUsage(up, raw)
		res.Body, err = translate.SetModel(raw, clientModel)
	} else {
		_, res.UsageReported = translate.ResponseUsage(up, raw)
		res.Body, res.Usage, err = translate.TranslateResponse(up, client, raw, clientModel, tools)
	}
	if err != nil {
		return fail(textError(http.StatusBadGateway, true, "upstream sent an unreadable response", err))
	}
	if !res.UsageReported {
		res.Usage = estimateUsage(up, raw, res.Usage)
	}
	return res, nil
}

// estimateUsage stands in for the usage of a complete answer that reported
// none: output tokens estimated from the size of the answer's text and tool
// arguments (about 4 bytes a token, as Stream.Usage does for streams), so
// that an upstream that omits usage is not served free.
func estimateUsage(up Protocol, raw []byte, u Usage) Usage {
	u.ReportedTotalTokens = nil
	if u.OutputTokens > 0 {
		return u
	}
	if r, err := translate.DecodeResponse(up, raw); err == nil {
		u.OutputTokens = estimateOutput(r)
	}
	return u
}

func estimateOutput(r *translate.Response) int64 {
	var n int64
	for _, p := range r.Parts {
		n += int64(len(p.Text) + len(p.Arguments))
	}
	return (n + 3) / 4
}

func transportErrOr(err error, f func(error) error) error {
	if _, ok := As(err); ok {
		return err
	}
	return f(err)
}

// upstreamBody is the body sent upstream: the client's bytes with the model
// rewritten, or a translation (with the map of the tool names it gave the
// upstream, which the answer's translation needs).
func upstreamBody(client, up Protocol, req Request, upstreamModel string, includeUsage bool) ([]byte, *translate.ToolMap, error) {
	if client != up {
		if err := samplingError(client, req.Body); err != nil {
			return nil, nil, err
		}
		return translate.TranslateRequest(client, up, req.Body, upstreamModel)
	}
	body, err := passThroughBody(up, req, upstreamModel, includeUsage)
	return body, nil, err
}

// passThroughBody is the client's bytes with the model rewritten.
func passThroughBody(up Protocol, req Request, upstreamModel string, includeUsage bool) ([]byte, error) {
	body, err := translate.SetModel(req.Body, upstreamModel)
	if err != nil {
		return nil, err
	}
	if up == ChatCompletions && req.Stream && !includeUsage {
		// Ask for the usage chunk for billing; the stream drops it again.
		if _, ok := translate.FieldRaw(body, "stream_options"); ok {
			return translate.SetField(body, []byte("true"), "stream_options", "include_usage")
		}
		return translate.SetField(body, []byte(`{"include_usage":true}`), "stream_options")
	}
	return body, nil
}

func isEventStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// Stream yields the answer of a streaming call as client-protocol events.
// It is not safe for concurrent use.
type Stream struct {
	body   io.ReadCloser
	rd     *translate.SSEReader
	tr     *translate.StreamTranslator
	cancel context.CancelFunc

	first      translate.Event
	hasFirst   bool
	beforeWait func()
	pending    []Event
	pos        int
	err        error
	ended      bool
	complete   bool
	closed     atomic.Bool
}

func newStream(body io.ReadCloser, up, client Protocol, model string, opts translate.StreamOptions, cancel context.CancelFunc) *Stream {
	return &Stream{
		body:   body,
		rd:     translate.NewSSEReader(body),
		tr:     translate.NewStreamTranslator(up, client, model, opts),
		cancel: cancel,
	}
}

// prime reads the first upstream event and turns an immediate error event
// into an *Error.
func (s *Stream) prime() error {
	ev, err := s.rd.Next()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	name := ev.Name
	if name == "" {
		name, _ = translate.FieldString(ev.Data, "type")
	}
	if name == "error" || name == "response.failed" || (ev.Name == "" && bytes.HasPrefix(ev.Data, []byte(`{"error"`))) {
		body := append([]byte(nil), ev.Data...)
		// The status the event's type stands for (overloaded_error 529,
		// rate_limit_error 429, ...) when it is one worth a retry; else 502.
		status := http.StatusBadGateway
		typ, _ := translate.FieldString(body, "error", "type")
		if s, ok := apierr.StatusOf(typ); ok && RetryableStatus(s) {
			status = s
		}
		ue := textStatusError(status, body)
		ue.Class, ue.Retryable = Failover, true
		return ue
	}
	s.first, s.hasFirst = ev, true
	return nil
}

// Next returns the next client event. The event's Data is valid until the
// next call. At the end it returns io.EOF, or another error when the
// upstream broke off (a translated stream still ends with a well-formed
// error event before that).
func (s *Stream) Next() (Event, error) {
	// The loop stays small: a stream's goroutine waits inside it for the
	// stream's whole life (see handlers.Text.serveHTTP); the end of the
	// stream and the translation are calls of their own.
	for s.pos >= len(s.pending) {
		if s.err != nil {
			return Event{}, s.err
		}
		var ev translate.Event
		var err error
		if s.hasFirst {
			ev, s.hasFirst = s.first, false
		} else {
			// Past the terminal event only the end is left to read: what
			// was written waits for the terminal events, which the caller
			// sends once the stream is settled, in one write with them.
			if s.beforeWait != nil && !s.tr.Done() && s.rd.WouldWait() {
				s.beforeWait()
			}
			ev, err = s.rd.Next()
		}
		if err != nil {
			s.end(err)
			continue
		}
		s.translate(ev)
	}
	s.pos++
	return s.pending[s.pos-1], nil
}

// end closes the translation when the upstream stream ended with err and
// queues its last events.
func (s *Stream) end(err error) {
	complete := s.tr.Done()
	s.ended, s.complete = true, complete
	s.pending, s.pos = s.tr.Finish(), 0
	switch {
	case err == io.EOF && complete:
		s.err = io.EOF
	case err == io.EOF:
		s.err = io.ErrUnexpectedEOF
	case s.closed.Load():
		s.err = errors.New("upstream: stream closed")
	default:
		s.err = err
	}
}

// translate queues the client events of one upstream event.
func (s *Stream) translate(ev translate.Event) {
	var err error
	s.pending, err = s.tr.Translate(ev)
	s.pos = 0
	if err != nil {
		s.err = err
		s.ended = true
		s.pending = s.tr.Finish()
	}
}

// BeforeWait sets a function that Next calls before it waits for the
// upstream (when no complete upstream event is buffered and the upstream
// has not ended: translate.SSEReader.WouldWait). A proxy that writes events
// without flushing each one flushes there, so events reach the client as
// soon as no further event is at hand, in as few writes as possible.
func (s *Stream) BeforeWait(f func()) { s.beforeWait = f }

// Usage is the usage so far; after Next returned an error it is final. When
// the upstream reported none, OutputTokens is estimated from the streamed
// text and ReportedTotalTokens is nil.
func (s *Stream) Usage() Usage { return s.tr.Usage() }

// UsageReported tells whether the upstream reported the usage.
func (s *Stream) UsageReported() bool { return s.tr.Reported() }

// Complete tells whether the upstream's final event was seen (a stream
// that broke off is not complete even though its translation was closed).
func (s *Stream) Complete() bool {
	if s.ended {
		return s.complete
	}
	return s.tr.Done()
}

// Close releases the upstream connection and the reader's buffer. Call it
// from the goroutine that calls Next, once no event it returned is in use:
// the buffer goes back to a pool other streams read into.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.body.Close()
	if s.cancel != nil {
		s.cancel()
	}
	s.rd.Release()
	return err
}

// streamFromBody turns a complete upstream answer into a client stream.
func streamFromBody(raw []byte, up, client Protocol, model string, opts translate.StreamOptions, cancel context.CancelFunc) (*Stream, error) {
	r, err := translate.DecodeResponse(up, raw)
	if err != nil {
		return nil, err
	}
	if _, ok := translate.ResponseUsage(up, raw); !ok && r.Usage.OutputTokens == 0 {
		// The replayed stream reports r.Usage: an estimate rather than zero.
		r.Usage.OutputTokens = estimateOutput(r)
	}
	var buf bytes.Buffer
	enc := translate.NewStreamEncoder(up, model, true)
	var evs []translate.Event
	for _, se := range translate.ResponseEvents(r) {
		evs = enc.Encode(se, evs)
	}
	for _, ev := range evs {
		buf.Write(ev.AppendSSE(nil))
	}
	s := newStream(io.NopCloser(&buf), up, client, model, opts, cancel)
	return s, nil
}
