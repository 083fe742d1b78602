// Package simulated is the built-in deterministic text provider: no network,
// it answers through an in-process http.RoundTripper so that calls take the
// same Invoke path as real upstreams. It serves `modelgate dev`, tests and
// benchmarks.
//
// Two providers are in the built-in list (package builtin): "simulated" speaks the messages protocol and
// "simulated-openai" speaks chat_completions and responses, so that routing
// a client to the one that does not speak its protocol exercises
// translation.
//
// It refuses what the public API it stands in for refuses (validate.go):
// the gateway passes a same-protocol request through unjudged.
//
// What it answers: the text of the last user message (tool results
// included) with directives removed, or, when asked for a length, that many
// words of lorem ipsum. Output tokens are words; input tokens are
// ceil(bytes/4) of all text in the request.
//
// Backend.Options (all optional):
//
//	latency      delay before the response headers, e.g. "20ms"
//	chunkDelay   delay between stream chunks, e.g. "5ms"
//	chunkTokens  words per stream chunk (default 1)
//	tokens       default answer length in words instead of echoing
//	failRate     fraction of requests that fail, 0..1, spread evenly and
//	             deterministically over the backend's requests
//	failStatus   HTTP status of those failures (default 503)
//
// Directives anywhere in the last user message, "[sim:key=value,...]"
// (several allowed; they override the options):
//
//	tokens=N       answer with N words
//	fail=STATUS    fail with that HTTP status and the protocol's error body
//	latency=D      as the option
//	delay=D        chunk delay, as chunkDelay
//	chunk=N        words per chunk, as chunkTokens
//	cache_read=N   report N cache-read input tokens
//	cache_write=N  report N cache-write input tokens
//	tool[=NAME]    call the tool NAME (default: the first declared tool)
//	               with arguments {"input": <answer text>}
//	stop=end_turn|max_tokens|stop_sequence|tool_use   force the stop reason
//	usage=none     chat_completions streams: send no usage chunk
//
// Without cache directives, a messages request that carries cache_control
// reports its system prompt, tools and all messages but the last as cache
// reads.
// max_tokens (and its equivalents) truncates the answer with stop reason
// max_tokens; a stop sequence in the answer cuts it with stop_sequence.
package simulated

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Names of the simulated providers in the built-in list.
const (
	Name       = "simulated"
	NameOpenAI = "simulated-openai"
)

// Provider is a simulated upstream speaking the given protocols.
type Provider struct {
	protocols []upstream.Protocol
	rt        *Transport
	client    *http.Client
}

// New returns a simulated provider speaking protocols (preferred first).
func New(protocols ...upstream.Protocol) *Provider {
	rt := &Transport{}
	return &Provider{protocols: protocols, rt: rt, client: &http.Client{Transport: rt}}
}

// Protocols implements upstream.TextProvider.
func (p *Provider) Protocols() []upstream.Protocol { return p.protocols }

type backendKey struct{}

// Send implements upstream.TextProvider through the in-process Transport.
func (p *Provider) Send(ctx context.Context, b upstream.Backend, proto upstream.Protocol, body []byte, stream bool, h http.Header) (*http.Response, error) {
	path := "/v1/messages"
	switch proto {
	case upstream.ChatCompletions:
		path = "/v1/chat/completions"
	case upstream.Responses:
		path = "/v1/responses"
	}
	req, err := upstream.NewJSONRequest(context.WithValue(ctx, backendKey{}, &b), "http://simulated"+path, body, stream)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"anthropic-version", "anthropic-beta"} { // as the anthropic provider forwards them
		for _, v := range h.Values(k) {
			req.Header.Add(k, v)
		}
	}
	return upstream.RoundTrip(p.client, req)
}

// CountTokens implements upstream.TokenCounter through the in-process
// Transport (POST /v1/messages/count_tokens): the input tokens a
// generation of the same body reports. Both simulated providers count, as
// the body is a messages request whatever protocol they generate in.
func (p *Provider) CountTokens(ctx context.Context, b upstream.Backend, body []byte, h http.Header) (int64, error) {
	req, err := upstream.NewJSONRequest(context.WithValue(ctx, backendKey{}, &b), "http://simulated/v1/messages/count_tokens", body, false)
	if err != nil {
		return 0, err
	}
	for _, k := range []string{"anthropic-version", "anthropic-beta"} {
		for _, v := range h.Values(k) {
			req.Header.Add(k, v)
		}
	}
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return 0, err
	}
	return upstream.ReadCount(resp, upstream.Messages, "input_tokens")
}

// Transport is an http.RoundTripper that answers POST /v1/messages,
// /v1/messages/count_tokens, /v1/chat/completions and /v1/responses like
// an upstream would. Backend
// options come from the request context (set by Provider.Send); without them
// the defaults apply.
type Transport struct {
	counters sync.Map // backend name → *atomic.Uint64
}

type settings struct {
	latency, chunkDelay time.Duration
	chunkTokens         int
	tokens              int
	failRate            float64
	failStatus          int
	fail                int
	cacheRead           *int64
	cacheWrite          *int64
	tool                *string
	stop                translate.StopReason
	noUsage             bool
}

func (s *settings) set(k, v string) {
	switch k {
	case "latency":
		s.latency, _ = time.ParseDuration(v)
	case "chunkDelay", "delay":
		s.chunkDelay, _ = time.ParseDuration(v)
	case "chunkTokens", "chunk":
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			s.chunkTokens = n
		}
	case "tokens":
		s.tokens, _ = strconv.Atoi(v)
	case "failRate":
		s.failRate, _ = strconv.ParseFloat(v, 64)
	case "failStatus":
		s.failStatus, _ = strconv.Atoi(v)
	case "fail":
		s.fail, _ = strconv.Atoi(v)
	case "cache_read":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			s.cacheRead = &n
		}
	case "cache_write":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			s.cacheWrite = &n
		}
	case "tool":
		s.tool = &v
	case "stop":
		s.stop = translate.StopReason(v)
	case "usage":
		s.noUsage = v == "none"
	}
}

// parseDirectives applies every [sim:...] directive in text and returns the
// text without them.
func parseDirectives(text string, s *settings) string {
	if !strings.Contains(text, "[sim:") {
		return text
	}
	var clean strings.Builder
	for {
		i := strings.Index(text, "[sim:")
		if i < 0 {
			clean.WriteString(text)
			break
		}
		j := strings.IndexByte(text[i:], ']')
		if j < 0 {
			clean.WriteString(text)
			break
		}
		clean.WriteString(text[:i])
		for kv := range strings.FieldsFuncSeq(text[i+5:i+j], func(r rune) bool { return r == ',' || r == ' ' }) {
			k, v, _ := strings.Cut(kv, "=")
			s.set(k, v)
		}
		text = text[i+j+1:]
	}
	return strings.TrimSpace(clean.String())
}

var errNoBody = errors.New("simulated: request has no body")

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		return nil, errNoBody
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	proto := upstream.Messages
	switch {
	case strings.HasSuffix(req.URL.Path, "/chat/completions"):
		proto = upstream.ChatCompletions
	case strings.HasSuffix(req.URL.Path, "/responses"):
		proto = upstream.Responses
	}
	s := settings{chunkTokens: 1, failStatus: http.StatusServiceUnavailable}
	var name string
	if b, ok := req.Context().Value(backendKey{}).(*upstream.Backend); ok {
		name = b.Name
		for k, v := range b.Options {
			s.set(k, v)
		}
	}
	if strings.HasSuffix(req.URL.Path, "/messages/count_tokens") {
		return count(req, body, &s)
	}
	if msg := validate(proto, body, req.Header); msg != "" {
		return errorResponse(req, proto, http.StatusBadRequest, msg), nil
	}
	ir, err := translate.DecodeRequest(proto, body)
	if err != nil {
		return errorResponse(req, proto, http.StatusBadRequest, "invalid request: "+err.Error()), nil
	}
	echo := parseDirectives(ir.LastUserText(), &s)
	if s.failRate > 0 && t.shouldFail(name, s.failRate) && s.fail == 0 {
		s.fail = s.failStatus
	}
	if s.latency > 0 {
		if err := sleep(req.Context(), s.latency); err != nil {
			return nil, err
		}
	}
	if s.fail >= 400 {
		return errorResponse(req, proto, s.fail, "simulated failure"), nil
	}
	resp := generate(ir, proto, echo, &s)
	h := http.Header{"Request-Id": {resp.ID}}
	if !ir.Stream {
		out, err := translate.EncodeResponse(proto, resp)
		if err != nil {
			return nil, err
		}
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Request: req,
			Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	includeUsage := !s.noUsage
	if proto == upstream.ChatCompletions && includeUsage {
		raw, _ := translate.FieldRaw(body, "stream_options", "include_usage")
		includeUsage = string(raw) == "true"
	}
	st := &stream{ctx: req.Context(), enc: translate.NewStreamEncoder(proto, resp.Model, includeUsage),
		evs: streamEvents(resp, s.chunkTokens), delay: s.chunkDelay}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Request: req, Body: st,
		ContentLength: -1, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// count answers a token count: the input tokens generate reports without
// cache directives, which split that same total. The fail and latency
// directives apply as to a generation.
func count(req *http.Request, body []byte, s *settings) (*http.Response, error) {
	if msg := validateCount(body, req.Header); msg != "" {
		return errorResponse(req, upstream.Messages, http.StatusBadRequest, msg), nil
	}
	ir, err := translate.DecodeRequest(upstream.Messages, body)
	if err != nil {
		return errorResponse(req, upstream.Messages, http.StatusBadRequest, "invalid request: "+err.Error()), nil
	}
	parseDirectives(ir.LastUserText(), s)
	if s.latency > 0 {
		if err := sleep(req.Context(), s.latency); err != nil {
			return nil, err
		}
	}
	if s.fail >= 400 {
		return errorResponse(req, upstream.Messages, s.fail, "simulated failure"), nil
	}
	prefix, last := inputSizes(ir)
	out := []byte(`{"input_tokens":` + strconv.FormatInt(tokensOf(prefix+last), 10) + `}`)
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}}, Request: req,
		Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

func (t *Transport) shouldFail(name string, rate float64) bool {
	c, _ := t.counters.LoadOrStore(name, new(atomic.Uint64))
	n := float64(c.(*atomic.Uint64).Add(1))
	return int64(n*rate) > int64((n-1)*rate)
}

func errorResponse(req *http.Request, proto upstream.Protocol, status int, msg string) *http.Response {
	body := translate.ErrorBody(proto, status, msg)
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Header: http.Header{"Content-Type": {"application/json"}}, Request: req,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

const lorem = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua "

// loremText returns n words of lorem ipsum.
func loremText(n int) string {
	words := strings.Count(lorem, " ")
	var b strings.Builder
	b.Grow(n * 6)
	for n >= words {
		b.WriteString(lorem)
		n -= words
	}
	rest := lorem
	for ; n > 0; n-- {
		i := strings.IndexByte(rest, ' ')
		b.WriteString(rest[:i+1])
		rest = rest[i+1:]
	}
	return strings.TrimSuffix(b.String(), " ")
}

// countWords counts output tokens: runs of non-space.
func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		sp := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

// cutWords returns the first n words of s (with their separators).
func cutWords(s string, n int) string {
	in := false
	for i, r := range s {
		sp := r == ' ' || r == '\n' || r == '\t'
		if !sp && !in {
			if n == 0 {
				return strings.TrimRight(s[:i], " \n\t")
			}
			n--
		}
		in = !sp
	}
	return s
}

func tokensOf(n int) int64 { return int64((n + 3) / 4) }

func generate(ir *translate.Request, proto upstream.Protocol, echo string, s *settings) *translate.Response {
	text := echo
	if s.tokens > 0 {
		text = loremText(s.tokens)
	} else if text == "" {
		text = "Hello from the simulated model."
	}
	stop := translate.StopEndTurn
	if ir.MaxTokens > 0 && int64(countWords(text)) > ir.MaxTokens {
		text = cutWords(text, int(ir.MaxTokens))
		stop = translate.StopMaxTokens
	}
	var stopSeq string
	for _, seq := range ir.Stop {
		if i := strings.Index(text, seq); seq != "" && i >= 0 {
			text, stop, stopSeq = text[:i], translate.StopSequence, seq
		}
	}
	resp := &translate.Response{Model: ir.Model, Created: time.Now().Unix(), Stop: stop, StopSequence: stopSeq}
	switch proto {
	case upstream.Messages:
		resp.ID = translate.NewID("msg_")
	case upstream.ChatCompletions:
		resp.ID = translate.NewID("chatcmpl-")
	default:
		resp.ID = translate.NewID("resp_")
	}
	if s.tool != nil && len(ir.Tools) > 0 {
		name := *s.tool
		if name == "" {
			name = ir.Tools[0].Name
		}
		args, _ := translate.SetString([]byte(`{}`), text, "input")
		prefix := "toolu_"
		if proto != upstream.Messages {
			prefix = "call_"
		}
		resp.Parts = []translate.Part{{Type: translate.PartToolCall, ID: translate.NewID(prefix), Name: name, Arguments: string(args)}}
		resp.Stop = translate.StopToolUse
	} else {
		resp.Parts = []translate.Part{{Type: translate.PartText, Text: text}}
	}
	if s.stop != "" {
		resp.Stop = s.stop
	}

	// Usage.
	prefix, last := inputSizes(ir)
	u := translate.Usage{OutputTokens: int64(countWords(text))}
	if resp.Parts[0].Type == translate.PartToolCall {
		u.OutputTokens = tokensOf(len(resp.Parts[0].Arguments)) + 1
	}
	switch {
	case s.cacheRead != nil || s.cacheWrite != nil:
		u.InputTokens = tokensOf(prefix + last)
		u.CacheReadTokens, u.CacheWriteTokens = s.cacheRead, s.cacheWrite
	case ir.CacheControl:
		u.InputTokens = tokensOf(last)
		u.CacheReadTokens = ptr(tokensOf(prefix))
		u.CacheWriteTokens = ptr(int64(0))
	default:
		u.InputTokens = tokensOf(prefix + last)
		if proto == upstream.Messages {
			u.CacheReadTokens, u.CacheWriteTokens = ptr(int64(0)), ptr(int64(0))
		} else {
			u.CacheReadTokens = ptr(int64(0))
		}
	}
	if proto != upstream.Messages {
		u.ReportedTotalTokens = ptr(u.TotalTokens())
	}
	resp.Usage = u
	return resp
}

// inputSizes are the sizes input tokens are counted from: of the system
// prompt, the tools and every message but the last (prefix, what a cache
// would hold), and of the last message.
func inputSizes(ir *translate.Request) (prefix, last int) {
	for _, sys := range ir.System {
		prefix += len(sys)
	}
	for _, t := range ir.Tools {
		prefix += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	for i, m := range ir.Messages {
		n := 0
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.Arguments) + len(p.Data)/8 + len(p.ImageURL)
		}
		if i == len(ir.Messages)-1 {
			last = n
		} else {
			prefix += n
		}
	}
	return prefix, last
}

func ptr[T any](v T) *T { return &v }

// streamEvents cuts resp into neutral events, chunkTokens words per delta.
func streamEvents(resp *translate.Response, chunkTokens int) []translate.StreamEvent {
	evs := translate.ResponseEvents(resp)
	out := make([]translate.StreamEvent, 0, len(evs)+countWords(resp.Parts[0].Text)/chunkTokens+2)
	for _, ev := range evs {
		if ev.Kind != translate.EvDelta || resp.Parts[0].Type != translate.PartText {
			out = append(out, ev)
			continue
		}
		for _, piece := range splitChunks(ev.Text, chunkTokens) {
			out = append(out, translate.StreamEvent{Kind: translate.EvDelta, Index: ev.Index, Text: piece})
		}
	}
	return out
}

// splitChunks cuts text into pieces of n words, each with the whitespace
// that follows it, so the pieces concatenate back to text.
func splitChunks(text string, n int) []string {
	pieces := make([]string, 0, len(text)/(6*n)+1)
	start, words, inWord := 0, 0, false
	for i, r := range text {
		sp := r == ' ' || r == '\n' || r == '\t'
		if !sp && !inWord {
			if words == n {
				pieces = append(pieces, text[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !sp
	}
	if start < len(text) {
		pieces = append(pieces, text[start:])
	}
	return pieces
}

// stream renders events as SSE on demand, sleeping delay between deltas.
type stream struct {
	ctx    context.Context
	enc    translate.StreamEncoder
	evs    []translate.StreamEvent
	next   int
	delay  time.Duration
	buf    []byte
	off    int
	out    []translate.Event
	closed atomic.Bool
	timer  *time.Timer
}

func (s *stream) Read(p []byte) (int, error) {
	for s.off >= len(s.buf) {
		if s.closed.Load() {
			return 0, errors.New("simulated: read on closed body")
		}
		if s.next >= len(s.evs) {
			return 0, io.EOF
		}
		ev := s.evs[s.next]
		s.next++
		if ev.Kind == translate.EvDelta && s.delay > 0 && s.next > 3 {
			if err := s.wait(); err != nil {
				return 0, err
			}
		}
		s.out = s.enc.Encode(ev, s.out[:0])
		s.buf, s.off = s.buf[:0], 0
		for _, e := range s.out {
			s.buf = e.AppendSSE(s.buf)
		}
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

func (s *stream) wait() error {
	if s.timer == nil {
		s.timer = time.NewTimer(s.delay)
	} else {
		s.timer.Reset(s.delay)
	}
	select {
	case <-s.timer.C:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *stream) Close() error {
	s.closed.Store(true)
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}
