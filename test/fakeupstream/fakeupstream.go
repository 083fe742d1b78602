// Package fakeupstream provides HTTP servers that answer like the public
// Anthropic Messages API, the OpenAI Chat Completions and Responses APIs and
// the Google Gemini API (generateContent), Azure OpenAI and Vertex AI,
// for tests that drive the gateway against "real" upstreams over the
// network.
//
// A Server checks the credential and version headers the public APIs
// require, validates the few request fields they reject most often, answers
// from a script of Replies (text, a tool call, stop reason, usage) in JSON or
// as a server-sent event stream with the exact event sequence of the public
// API, can be told to fail (an error status with the API's error body, a
// connection reset, a hang until the caller gives up, a stream that dies
// after N events), and records every request it received so that tests can
// assert what the gateway sent.
package fakeupstream

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// DefaultKey is the credential a new Server accepts.
const DefaultKey = "sk-fake-upstream-credential-0123456789"

// Usage is the token accounting a Reply reports. Cache fields that are nil
// are left out of the wire format (an upstream that does not report them).
type Usage struct {
	// InputTokens are input tokens neither read from nor written to a
	// cache (Anthropic's input_tokens). OpenAI formats report
	// InputTokens + CacheRead as prompt/input tokens.
	InputTokens  int64
	OutputTokens int64
	// CacheRead is Anthropic's cache_read_input_tokens and OpenAI's
	// prompt_tokens_details.cached_tokens / input_tokens_details.cached_tokens.
	CacheRead *int64
	// CacheWrite is Anthropic's cache_creation_input_tokens; OpenAI formats
	// have no equivalent and ignore it.
	CacheWrite *int64
	// ReasoningTokens are reported by the OpenAI formats (inside
	// OutputTokens), and by Gemini as thoughtsTokenCount (its
	// candidatesTokenCount is OutputTokens minus these).
	ReasoningTokens int64
}

// Int64 returns a pointer to n, for the Usage cache fields.
func Int64(n int64) *int64 { return &n }

// ToolCall is a function call the upstream answers with.
type ToolCall struct {
	// ID is the call's ID (toolu_… for Anthropic, call_… for OpenAI);
	// empty: one is generated.
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the JSON object of arguments.
	Arguments string
}

// Reply scripts one answer of a Server.
type Reply struct {
	// Text is the answer's text (may be empty when ToolCall is set).
	Text string
	// ToolCall, when set, follows the text.
	ToolCall *ToolCall
	// StopReason in Anthropic's terms: end_turn (default; tool_use when
	// ToolCall is set), max_tokens, stop_sequence. Mapped to OpenAI's
	// finish_reason / status for the OpenAI formats.
	StopReason string
	// Usage reported; the zero value reports 10 input tokens and one
	// output token per word of Text (at least 1).
	Usage Usage

	// Status, when non-zero, answers with that HTTP status and the API's
	// error body (ErrorType, ErrorMessage; defaults by status).
	Status       int
	ErrorType    string
	ErrorMessage string
	// RetryDelay, with Status, is Gemini's RetryInfo retryDelay ("7s"),
	// and for Bedrock a Retry-After header ("7").
	RetryDelay string
	// Reset closes the connection without any response.
	Reset bool
	// Hang holds the request until the client gives up (or the server is
	// closed), without sending anything.
	Hang bool
	// Delay waits before answering (an upstream slower than a timeout).
	Delay time.Duration
	// CutAfter, for a stream, closes the connection abruptly after that
	// many events were sent and flushed (0: the stream completes).
	CutAfter int
	// StallAfter, for a stream, stops sending after that many events and
	// holds the connection open until the client gives up (with Stall set;
	// StallAfter 0 then sends the headers and nothing else).
	StallAfter int
	Stall      bool
	// ErrorEventAfter, for a stream, sends the API's error event (with
	// ErrorType, default overloaded_error / server_error, and ErrorMessage)
	// after that many events and ends the stream, as the APIs do for an
	// overload mid-stream; with ErrorEvent set, 0 sends it first.
	ErrorEventAfter int
	ErrorEvent      bool
	// Gap paces a stream: the wait after each event.
	Gap time.Duration
	// NoUsage leaves usage out of the answer (a chat stream without the
	// usage chunk even when include_usage was asked for; JSON without usage).
	NoUsage bool
	// IgnoreStream answers a stream request with a complete JSON body.
	IgnoreStream bool
}

// Request is one request a Server received.
type Request struct {
	Method string
	Path   string
	// Query is the raw query string (Gemini's alt=sse, Azure's api-version).
	Query  string
	Header http.Header
	Body   []byte
	// Rejected is set when the server answered with an error of its own
	// (authentication or validation), not from the script.
	Rejected bool
	// ProtoMajor is the request's HTTP major version (2: HTTP/2).
	ProtoMajor int
	// TLS is set when the request came over TLS.
	TLS bool
}

// JSON decodes the body into a generic map (nil if it is not an object).
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Model is the body's model field, or for Gemini and Vertex AI the path's
// model.
func (r Request) Model() string {
	if m, _, ok := geminiPath(r.Path); ok {
		return m
	}
	if m, _, ok := bedrockModelPath(r.Path); ok {
		return m
	}
	if rt, ok := vertexPath(r.Path); ok {
		return rt.model
	}
	s, _ := r.JSON()["model"].(string)
	return s
}

// Stream is the body's stream flag, or for Gemini and Vertex AI whether the
// method is a streaming one.
func (r Request) Stream() bool {
	if _, method, ok := geminiPath(r.Path); ok {
		return method == "streamGenerateContent"
	}
	if _, method, ok := bedrockModelPath(r.Path); ok {
		return method == "converse-stream"
	}
	if rt, ok := vertexPath(r.Path); ok {
		return rt.stream()
	}
	b, _ := r.JSON()["stream"].(bool)
	return b
}

type kind int

const (
	kindAnthropic kind = iota
	kindOpenAI
	kindGemini
	kindAzure
	kindBedrock
	kindVertex
)

// Server is a fake upstream API on a loopback port. Its methods are safe
// for concurrent use.
type Server struct {
	*httptest.Server
	kind kind

	mu       sync.Mutex
	key      string
	script   []Reply
	def      Reply
	handler  func(Request) Reply
	reqs     []Request
	stop     chan struct{}
	stopOnce sync.Once
	seq      int

	// msgBatches is the Anthropic fake's Message Batches API
	// (anthropicbatch.go), made on first use.
	msgBatches *messageBatches
	// deployments are the Azure deployments that exist (none: any name).
	deployments map[string]bool
	// entraTokens validates an Azure request's Entra ID bearer token (nil:
	// key authentication only).
	entraTokens func(string) bool
	// sessionToken is the Bedrock session token required (none: none).
	sessionToken string
	// vertex is the Vertex AI fake's service account and tokens.
	vertex *vertexState
	// batch is the OpenAI fake's Batch API and Files API (nil: the server
	// has none and answers 404, as an OpenAI-compatible server without them).
	batch *batchState
	// bbatch is the Bedrock fake's batch jobs and S3 objects.
	bbatch *bedrockBatch
}

// NewAnthropic starts a fake of the Anthropic Messages API
// (POST /v1/messages). It requires x-api-key = Key() and an
// anthropic-version header.
func NewAnthropic() *Server { return newServer(kindAnthropic) }

// NewOpenAI starts a fake of the OpenAI API (POST /v1/chat/completions and
// POST /v1/responses, and the Batch API with the files it reads and writes:
// openaibatch.go). It requires Authorization: Bearer Key().
func NewOpenAI() *Server { return newServer(kindOpenAI) }

// NewOpenAIWithoutBatch starts the OpenAI fake without the Batch and Files
// APIs: their routes answer 404, as an OpenAI-compatible server without
// them does.
func NewOpenAIWithoutBatch() *Server {
	s := newServer(kindOpenAI)
	s.mu.Lock()
	s.batch = nil
	s.mu.Unlock()
	return s
}

// NewOpenAIPlain starts the OpenAI fake over plain HTTP/1.1 whatever
// PlainEnv says: the path of an in-cluster upstream without TLS.
func NewOpenAIPlain() *Server { return newServerWith(kindOpenAI, startPlain) }

func newServer(k kind) *Server { return newServerWith(k, start) }

func newServerWith(k kind, startWith func(http.Handler) *httptest.Server) *Server {
	s := &Server{kind: k, key: DefaultKey, stop: make(chan struct{}),
		def: Reply{Text: "Hello from the fake upstream."}}
	if k == kindOpenAI {
		s.batch = newBatchState()
	}
	s.Server = startWith(http.HandlerFunc(s.serve))
	return s
}

// RootCAs is a pool holding the certificate every TLS fake serves
// (net/http/httptest's, the same for each server): what a gateway under
// test verifies its fake upstreams with.
func RootCAs() *x509.CertPool { return rootCAs() }

var rootCAs = sync.OnceValue(func() *x509.CertPool {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return pool
})

// Close releases hanging requests and shuts the server down.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.CloseClientConnections()
	s.Server.Close()
}

// Key is the credential the server accepts.
func (s *Server) Key() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// SetKey changes the accepted credential.
func (s *Server) SetKey(k string) {
	s.mu.Lock()
	s.key = k
	s.mu.Unlock()
}

// Enqueue appends replies to the script; each request consumes the first.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, r...)
	s.mu.Unlock()
}

// SetDefault sets the reply used when the script is empty.
func (s *Server) SetDefault(r Reply) {
	s.mu.Lock()
	s.def = r
	s.mu.Unlock()
}

// Handle makes f choose the reply when the script is empty (instead of the
// default reply).
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	s.handler = f
	s.mu.Unlock()
}

// Requests returns copies of the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	return cloneRequests(&s.mu, &s.reqs)
}

// countRequests counts the requests with method whose path starts with
// prefix.
func countRequests(reqs []Request, method, prefix string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// cloneRequests copies a fake's request log under its lock.
func cloneRequests(mu *sync.Mutex, log *[]Request) []Request {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Request, len(*log))
	for i, r := range *log {
		out[i] = Request{Method: r.Method, Path: r.Path, Query: r.Query, Header: r.Header.Clone(), Body: bytes.Clone(r.Body), Rejected: r.Rejected,
			ProtoMajor: r.ProtoMajor, TLS: r.TLS}
	}
	return out
}

// Count is the number of requests received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Last is the latest request; it panics when there is none.
func (s *Server) Last() Request {
	r := s.Requests()
	return r[len(r)-1]
}

// Reset forgets the recorded requests and the script.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs, s.script = nil, nil
	s.mu.Unlock()
}

// RefusedURL returns an http URL on which nothing listens: a connection to
// it is refused.
func RefusedURL() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

func (s *Server) record(r *http.Request, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body,
		ProtoMajor: r.ProtoMajor, TLS: r.TLS != nil})
	return len(s.reqs) - 1
}

func (s *Server) reject(i int) {
	s.mu.Lock()
	s.reqs[i].Rejected = true
	s.mu.Unlock()
}

func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if len(s.script) > 0 {
		r := s.script[0]
		s.script = s.script[1:]
		return r
	}
	if s.handler != nil {
		h := s.handler
		s.mu.Unlock()
		r := h(req)
		s.mu.Lock()
		return r
	}
	return s.def
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s%024d", prefix, s.seq)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(errDone); !ok {
				panic(v)
			}
		}
	}()
	if isMessageBatchesPath(r.URL.Path) && s.messageBatchesOn() {
		s.serveMessageBatches(w, r) // records the request itself
		return
	}
	if s.kind == kindVertex && r.URL.Path == vertexTokenPath {
		s.serveToken(w, r) // not an API request: not recorded
		return
	}
	if s.kind == kindVertex && s.serveVertexBatch(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	i := s.record(r, body)
	if s.kind == kindOpenAI && isBatchPath(r.URL.Path) && s.hasBatchAPI() {
		s.serveBatch(w, r, body, i)
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header, Body: body}
	if s.kind == kindBedrock && isBedrockBatch(r) {
		if !s.serveBedrockBatch(w, r, body) {
			s.reject(i)
		}
		return
	}
	var ok bool
	switch s.kind {
	case kindAnthropic:
		ok = s.checkAnthropic(w, r, body)
	case kindGemini:
		ok = s.checkGemini(w, r, body)
	case kindAzure:
		ok = s.checkAzure(w, r, body)
	case kindBedrock:
		ok = s.checkBedrock(w, r, body)
	case kindVertex:
		ok = s.checkVertex(w, r, body)
	default:
		ok = s.checkOpenAI(w, r, body)
	}
	if !ok {
		s.reject(i)
		return
	}
	reply := s.next(req)
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
	switch {
	case reply.Hang:
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	case reply.Reset:
		panic(http.ErrAbortHandler) // closes the connection without a response
	case reply.Status != 0 && s.kind == kindVertex:
		s.vertexError(w, r, reply)
		return
	case reply.Status != 0 && s.kind == kindGemini:
		msg := reply.ErrorMessage
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeJSON(w, reply.Status, geminiError(reply.Status, msg, reply.RetryDelay))
		return
	case reply.Status != 0 && s.kind == kindBedrock:
		exc, msg := bedrockException(reply.Status)
		if reply.ErrorType != "" {
			exc = reply.ErrorType
		}
		if reply.ErrorMessage != "" {
			msg = reply.ErrorMessage
		}
		if reply.RetryDelay != "" {
			w.Header().Set("Retry-After", reply.RetryDelay)
		}
		writeBedrockError(w, reply.Status, exc, msg)
		return
	case reply.Status != 0:
		s.writeError(w, reply.Status, reply.ErrorType, reply.ErrorMessage)
		return
	}
	if s.isEmbedding(r) {
		s.embeddingReply(w, r, body, reply)
		return
	}
	if s.isCount(r) {
		s.countReply(w, r, body, reply)
		return
	}
	stream := req.Stream() && !reply.IgnoreStream
	switch {
	case s.kind == kindVertex:
		s.vertexReply(w, r, req, reply, stream)
	case s.kind == kindGemini:
		s.geminiReply(w, r, req.Model(), reply, stream)
	case s.kind == kindBedrock:
		s.bedrockReply(w, r, reply, stream)
	case s.kind == kindAnthropic:
		s.anthropicReply(w, r, req, reply, stream)
	case r.URL.Path == "/v1/responses":
		s.responsesReply(w, r, req, reply, stream)
	default:
		s.chatReply(w, r, req, reply, stream)
	}
}

func (s *Server) writeError(w http.ResponseWriter, status int, typ, msg string) {
	if msg == "" {
		msg = http.StatusText(status)
	}
	if s.kind == kindAzure {
		writeAzureError(w, status, typ, msg)
		return
	}
	if s.kind == kindAnthropic {
		if typ == "" {
			typ = anthropicErrorType(status)
		}
		w.Header().Set("request-id", s.id("req_"))
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		return
	}
	if typ == "" {
		typ = openAIErrorType(status)
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func anthropicErrorType(status int) string {
	switch status {
	case 400, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529, 503:
		return "overloaded_error"
	}
	return "api_error"
}

func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "invalid_request_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sseWriter writes events one by one, flushing each, and carries out the
// reply's stream failure (cut, stall, error event) at its point.
type sseWriter struct {
	srv   *Server
	w     http.ResponseWriter
	r     *http.Request
	reply Reply
	n     int
}

// errDone ends a handler after a stream failure was carried out.
type errDone struct{}

func (s *Server) startSSE(w http.ResponseWriter, r *http.Request, reply Reply) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
	sw := &sseWriter{srv: s, w: w, r: r, reply: reply}
	sw.failure()
	return sw
}

// failure carries out the reply's stream failure when its point is reached.
func (s *sseWriter) failure() {
	r := s.reply
	switch {
	case r.CutAfter > 0 && s.n >= r.CutAfter:
		// The connection dies mid-stream: everything written so far is
		// flushed and the connection closed (FIN) without ending the chunked
		// body. Aborting the handler instead could reset the connection,
		// and a reset lets the peer's kernel discard data it already
		// received, which makes "what was sent before the cut" a race.
		rc := http.NewResponseController(s.w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			_ = conn.Close()
			panic(errDone{})
		}
		panic(http.ErrAbortHandler)
	case r.Stall && s.n >= r.StallAfter:
		select {
		case <-s.r.Context().Done():
		case <-s.srv.stop:
		}
		panic(errDone{})
	case r.ErrorEvent && s.n >= r.ErrorEventAfter:
		msg := r.ErrorMessage
		if msg == "" {
			msg = "Overloaded"
		}
		typ := r.ErrorType
		if wire := s.srv.wire(s.r); wire == kindGemini {
			// A stream that fails after it began ends with an error chunk.
			s.write("", geminiError(http.StatusServiceUnavailable, msg, ""))
		} else if wire == kindAnthropic {
			if typ == "" {
				typ = "overloaded_error"
			}
			s.write("error", map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		} else if s.r.URL.Path == "/v1/responses" {
			if typ == "" {
				typ = "server_error"
			}
			s.write("error", map[string]any{"type": "error", "code": typ, "message": msg, "param": nil, "sequence_number": s.n})
		} else {
			if typ == "" {
				typ = "server_error"
			}
			s.write("", map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
		}
		panic(errDone{})
	}
}

// event writes one event; name may be empty (OpenAI chat chunks).
func (s *sseWriter) event(name string, data any) {
	s.write(name, data)
	s.n++
	if s.reply.Gap > 0 {
		select {
		case <-time.After(s.reply.Gap):
		case <-s.r.Context().Done():
			panic(errDone{})
		case <-s.srv.stop:
			panic(errDone{})
		}
	}
	s.failure()
}

func (s *sseWriter) write(name string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		b, _ = json.Marshal(d)
	}
	var buf bytes.Buffer
	if name != "" {
		buf.WriteString("event: " + name + "\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	if s.srv.wire(s.r) == kindGemini {
		buf.WriteString("\r\n\r\n") // Google's SSE frames end in CRLF
	} else {
		buf.WriteString("\n\n")
	}
	_, _ = s.w.Write(buf.Bytes())
	http.NewResponseController(s.w).Flush()
}

// chunks splits text the way a model streams it: word by word, spaces kept.
func chunks(text string) []string {
	if text == "" {
		return nil
	}
	return strings.SplitAfter(text, " ")
}

func (r Reply) usage() Usage {
	u := r.Usage
	if u.InputTokens == 0 && u.OutputTokens == 0 && u.CacheRead == nil && u.CacheWrite == nil {
		u.InputTokens = 10
		u.OutputTokens = int64(max(1, len(strings.Fields(r.Text))))
	}
	return u
}

func (r Reply) stopReason() string {
	if r.StopReason != "" {
		return r.StopReason
	}
	if r.ToolCall != nil {
		return "tool_use"
	}
	return "end_turn"
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
