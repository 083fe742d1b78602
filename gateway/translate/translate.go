package translate

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/modelgate/modelgate/gateway/apierr"
)

// errUpstreamOnly: the gateway neither reads requests in the gemini and
// bedrock protocols nor answers in them.
var errUpstreamOnly = errors.New("translate: gemini and bedrock are upstream protocols only")

// DecodeRequest parses a request body of protocol p into the neutral form.
func DecodeRequest(p Protocol, body []byte) (*Request, error) {
	switch p {
	case Messages:
		return decodeMessagesRequest(body)
	case ChatCompletions:
		return decodeChatRequest(body)
	case Responses:
		return decodeResponsesRequest(body)
	case Gemini, Bedrock:
		return nil, errUpstreamOnly
	}
	return nil, fmt.Errorf("translate: unknown protocol %q", p)
}

// EncodeRequest renders r as a request body of protocol p for model. It
// rewrites r's tools and tool calls as TranslateRequest does (see
// prepareTools).
func EncodeRequest(p Protocol, r *Request, model string) ([]byte, error) {
	out, _, err := encodeRequest(p, r, model)
	return out, err
}

// encodeRequest is EncodeRequest that also returns the map of the tool
// names it gave the upstream.
func encodeRequest(p Protocol, r *Request, model string) ([]byte, *ToolMap, error) {
	tools := prepareTools(r)
	out, err := encodeRequestBody(p, r, model)
	return out, tools, err
}

func encodeRequestBody(p Protocol, r *Request, model string) ([]byte, error) {
	switch p {
	case Messages:
		return encodeMessagesRequest(r, model)
	case ChatCompletions:
		return encodeChatRequest(r, model)
	case Responses:
		return encodeResponsesRequest(r, model)
	case Gemini:
		return encodeGeminiRequest(r, model)
	case Bedrock:
		return encodeBedrockRequest(r, model)
	}
	return nil, fmt.Errorf("translate: unknown protocol %q", p)
}

// DecodeResponse parses a complete (non-streaming) response body of protocol
// p.
func DecodeResponse(p Protocol, body []byte) (*Response, error) {
	switch p {
	case Messages:
		return decodeMessagesResponse(body)
	case ChatCompletions:
		return decodeChatResponse(body)
	case Responses:
		return decodeResponsesResponse(body)
	case Gemini:
		return decodeGeminiResponse(body)
	case Bedrock:
		return decodeBedrockResponse(body)
	}
	return nil, fmt.Errorf("translate: unknown protocol %q", p)
}

// EncodeResponse renders r as a complete response body of protocol p. IDs
// get the protocol's prefix (msg_, chatcmpl-, resp_) when r.ID lacks it.
func EncodeResponse(p Protocol, r *Response) ([]byte, error) {
	return encodeResponse(p, r, "")
}

// encodeResponse is EncodeResponse for an answer of upstream protocol
// from, whose thinking signatures a responses client carries back.
func encodeResponse(p Protocol, r *Response, from Protocol) ([]byte, error) {
	switch p {
	case Messages:
		return encodeMessagesResponse(r)
	case ChatCompletions:
		return encodeChatResponse(r)
	case Responses:
		return encodeResponsesResponse(r, from)
	case Gemini, Bedrock:
		return nil, errUpstreamOnly
	}
	return nil, fmt.Errorf("translate: unknown protocol %q", p)
}

// ResponseUsage reads the usage of a complete response body of protocol p
// without decoding the rest. It returns false when the body has none.
func ResponseUsage(p Protocol, body []byte) (Usage, bool) {
	var u Usage
	var ok bool
	switch p {
	case Messages:
		u, ok = messagesUsageOf(body)
	case ChatCompletions:
		u, ok = chatUsageOf(body)
	case Responses:
		u, ok = responsesUsageOf(body)
	case Gemini:
		u, ok = geminiUsageOf(body)
	case Bedrock:
		u, ok = bedrockUsageOf(body)
	}
	return u.nonNegative(), ok
}

// TranslateRequest converts a client request body of protocol from into a
// body of protocol to for upstreamModel. When from == to only the model field
// is rewritten and every other byte is kept.
//
// It fails only when the body cannot be read as protocol from at all (see
// DecodeRequest); fields, roles, blocks and tools it has no equivalent for
// are mapped or dropped by the rules of docs/protocol-mapping.md. The
// ToolMap, for TranslateResponse and StreamOptions, maps the tool names the
// upstream was given back to the client's; it is nil when the names were
// sent as they were and no tool is freeform (always for from == to).
func TranslateRequest(from, to Protocol, body []byte, upstreamModel string) ([]byte, *ToolMap, error) {
	if from == to {
		out, err := SetModel(body, upstreamModel)
		return out, nil, err
	}
	r, err := DecodeRequest(from, body)
	if err != nil {
		return nil, nil, err
	}
	if upstreamModel == "" {
		upstreamModel = r.Model
	}
	return encodeRequest(to, r, upstreamModel)
}

// TranslateResponse converts a complete upstream response of protocol from
// into protocol to, with clientModel as its model, and returns its usage.
// tools is the request's ToolMap (TranslateRequest): the upstream's calls
// of renamed or freeform tools become calls of the client's tools. When
// from == to the body is kept except for the model field.
func TranslateResponse(from, to Protocol, body []byte, clientModel string, tools *ToolMap) ([]byte, Usage, error) {
	if from == to {
		u, _ := ResponseUsage(from, body)
		out, err := SetModel(body, clientModel)
		return out, u, err
	}
	r, err := DecodeResponse(from, body)
	if err != nil {
		return nil, Usage{}, err
	}
	if clientModel != "" {
		r.Model = clientModel
	}
	for i := range r.Parts {
		tools.restorePart(&r.Parts[i])
	}
	out, err := encodeResponse(to, r, from)
	return out, r.Usage.nonNegative(), err
}

// SetModel rewrites the top-level "model" string of body. An empty model, or
// one equal to the current value, returns body unchanged.
func SetModel(body []byte, model string) ([]byte, error) {
	if model == "" {
		return body, nil
	}
	if cur, ok := FieldRaw(body, "model"); ok && len(cur) == len(model)+2 && string(cur[1:len(cur)-1]) == model {
		return body, nil
	}
	return SetString(body, model, "model")
}

// StreamEncoder renders neutral stream events in one protocol. The simulated
// provider uses it to produce its native stream.
type StreamEncoder interface {
	Encode(ev StreamEvent, out []Event) []Event
}

type encoderFunc func(StreamEvent, []Event) []Event

func (f encoderFunc) Encode(ev StreamEvent, out []Event) []Event { return f(ev, out) }

// NewStreamEncoder returns an encoder of protocol p. includeUsage adds the
// chat-completions usage chunk (stream_options.include_usage).
func NewStreamEncoder(p Protocol, model string, includeUsage bool) StreamEncoder {
	switch p {
	case Messages:
		return encoderFunc(newMessagesEncoder(model).encode)
	case ChatCompletions:
		return encoderFunc(newChatEncoder(model, includeUsage).encode)
	case Gemini:
		return encoderFunc(newGeminiEncoder().encode)
	case Bedrock:
		return encoderFunc(newBedrockEncoder().encode)
	default:
		return encoderFunc(newResponsesEncoder(model).encode)
	}
}

type streamDecoder interface {
	decode(ev Event, out []StreamEvent) ([]StreamEvent, error)
	finish(out []StreamEvent) []StreamEvent
}

func newStreamDecoder(p Protocol) streamDecoder {
	switch p {
	case Messages:
		return &messagesDecoder{}
	case ChatCompletions:
		return newChatDecoder()
	case Gemini:
		return &geminiDecoder{}
	case Bedrock:
		return &bedrockDecoder{}
	default:
		return newResponsesDecoder()
	}
}

// StreamOptions tune a StreamTranslator.
type StreamOptions struct {
	// IncludeUsage: a chat-completions client asked for the usage chunk
	// (stream_options.include_usage). When false and the upstream is
	// chat-completions too, the usage chunk the gateway requested for its
	// own accounting is dropped from the client stream.
	IncludeUsage bool
	// Tools is the request's ToolMap (TranslateRequest): the upstream's
	// calls of renamed or freeform tools become calls of the client's
	// tools.
	Tools *ToolMap
}

// StreamTranslator turns an upstream SSE stream of one protocol into the
// client's protocol while counting usage. It is not safe for concurrent
// use; returned slices are valid until the next call.
type StreamTranslator struct {
	from, to Protocol
	model    string
	opts     StreamOptions
	dec      streamDecoder
	enc      StreamEncoder
	evs      []StreamEvent
	out      []Event
	// patched holds a pass-through event whose model was rewritten: like
	// out, reused by the next call.
	patched []byte
	// modelPrefix is the previous chunk's bytes before its top-level
	// model value (modelSpan).
	modelPrefix []byte

	usage       Usage
	reported    bool
	deltaBytes  int64
	deltaChunks int64
	done        bool
}

// NewStreamTranslator returns a translator from upstream protocol from to
// client protocol to; clientModel is the model the client sees.
func NewStreamTranslator(from, to Protocol, clientModel string, opts StreamOptions) *StreamTranslator {
	t := &StreamTranslator{from: from, to: to, model: clientModel, opts: opts}
	if from != to {
		t.dec = newStreamDecoder(from)
		if to == Responses {
			enc := newResponsesEncoder(clientModel)
			enc.signer = from
			t.enc = encoderFunc(enc.encode)
		} else {
			t.enc = NewStreamEncoder(to, clientModel, opts.IncludeUsage)
		}
	}
	return t
}

// Translate consumes one upstream event and returns the client events it
// produces (possibly none). The events, and their data, are valid until the
// next call, as the event read from an SSEReader is.
func (t *StreamTranslator) Translate(ev Event) ([]Event, error) {
	t.out = t.out[:0]
	if t.dec == nil {
		return t.passThrough(ev)
	}
	var err error
	t.evs, err = t.dec.decode(ev, t.evs[:0])
	if err != nil {
		return nil, err
	}
	return t.encode(), nil
}

// Finish is called at the upstream's EOF: it closes whatever the upstream
// left open (a translated stream always ends well-formed, with an error
// event when the upstream stopped early) and returns the last client events.
func (t *StreamTranslator) Finish() []Event {
	t.out = t.out[:0]
	if t.dec == nil || t.done {
		return nil
	}
	t.evs = t.dec.finish(t.evs[:0])
	return t.encode()
}

func (t *StreamTranslator) encode() []Event {
	for i := range t.evs {
		ev := &t.evs[i]
		switch ev.Kind {
		case EvDelta:
			t.deltaBytes += int64(len(ev.Text))
			t.deltaChunks++
		case EvBlockStart:
			if ev.Part == PartToolCall && t.opts.Tools != nil {
				if o, ok := t.opts.Tools.origin(ev.Name); ok {
					ev.Name, ev.Namespace, ev.Custom = o.name, o.namespace, o.custom
				}
			}
		case EvStart:
			t.usage = ev.Usage
		case EvFinish:
			t.done = true
			if ev.UsageReported {
				t.usage, t.reported = ev.Usage, true
			} else {
				ev.Usage = t.Usage()
			}
		case EvError:
			t.done = true
		}
		t.out = t.enc.Encode(*ev, t.out)
	}
	return t.out
}

// Usage returns the usage seen so far: the upstream's report when it sent
// one (reported true), else an estimate of the output tokens from the text
// streamed (ReportedTotalTokens nil).
func (t *StreamTranslator) Usage() Usage {
	if t.reported {
		return t.usage.nonNegative()
	}
	u := t.usage.nonNegative()
	u.ReportedTotalTokens = nil
	if u.OutputTokens == 0 {
		u.OutputTokens = max((t.deltaBytes+3)/4, t.deltaChunksEstimate())
	}
	return u
}

func (t *StreamTranslator) deltaChunksEstimate() int64 {
	if t.from == ChatCompletions {
		return t.deltaChunks // chat upstreams send about one token per chunk
	}
	return 0
}

// Reported tells whether the upstream reported the final usage.
func (t *StreamTranslator) Reported() bool { return t.reported }

// Done tells whether the upstream's terminal event was seen.
func (t *StreamTranslator) Done() bool { return t.done }

// ErrorBody renders an error in the client protocol's shape: messages
// {"type":"error","error":{"type","message"}}; chat_completions and responses
// {"error":{"message","type","param","code"}}. The error type follows the
// HTTP status by apierr's table of the client's family, the same table the
// gateway's own errors use.
func ErrorBody(p Protocol, status int, message string) []byte {
	if p == Messages {
		return messagesErrorBody(apierr.MessagesType(status), message)
	}
	return openAIErrorBody(apierr.OpenAIType(status), message)
}

// errStatus is the HTTP status an upstream's error type stands for (its
// stream error events carry a type, not a status); 500 for a type neither
// family names.
func errStatus(typ string) int {
	if s, ok := apierr.StatusOf(typ); ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorMessage extracts error.message (or message) from an upstream error
// body of any protocol.
func ErrorMessage(body []byte) (string, bool) {
	if s, ok := FieldString(body, "error", "message"); ok {
		return s, true
	}
	if s, ok := FieldString(body, "message"); ok {
		return s, true
	}
	if s, ok := FieldString(body, "error"); ok {
		return s, true
	}
	return "", false
}
