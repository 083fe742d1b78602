package translate

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
)

// The neutral form: every protocol codec decodes into and encodes from these
// types, so a translation pair is a decoder of one protocol composed with an
// encoder of another.

// PartType is the kind of a content part.
type PartType uint8

// Content part kinds.
const (
	PartText PartType = iota
	PartImage
	PartToolCall
	PartToolResult
	PartThinking
)

// Part is one piece of message content.
type Part struct {
	Type PartType
	// Text is the text of a text, thinking or tool result part.
	Text string
	// Signature is the messages protocol's thinking signature; Signer the
	// upstream protocol that issued it when the part came back from a
	// client that carried it for the gateway (a responses reasoning item's
	// encrypted_content), else empty.
	Signature string
	Signer    Protocol
	// Redacted is the opaque data of a redacted thinking block.
	Redacted string
	// ImageURL is an image given by URL; MediaType and Data an inline
	// base64 image.
	ImageURL  string
	MediaType string
	Data      string
	// ID is a tool call's ID, or for a tool result the ID of the call.
	ID string
	// Name and Arguments (JSON text) describe a tool call; Namespace is
	// the responses protocol's namespace of the tool.
	Name      string
	Namespace string
	Arguments string
	// Custom marks a call of a freeform (custom) tool: Input is its text
	// and Arguments is unused.
	Custom bool
	Input  string
	// IsError marks a failed tool result.
	IsError bool
}

// Message is one conversation turn. Role is "user" or "assistant" (tool
// results are user parts), or "system" for a system or developer message
// that came after the conversation began (leading ones are
// Request.System).
type Message struct {
	Role  string
	Parts []Part
}

// Tool is a function the model may call. Namespace is the responses
// protocol's namespace the tool was declared in. Custom marks a freeform
// tool (its input is text, not JSON); Format is then its input format as
// the client gave it (a grammar, or plain text).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Namespace   string
	Custom      bool
	Format      json.RawMessage
}

// ToolChoice is the tool selection policy: Mode "auto", "none", "required"
// or "tool" (then Name says which). Allowed, when set, narrows the tools
// the model may call to those names (OpenAI's allowed_tools; Mode is then
// "auto" or "required").
type ToolChoice struct {
	Mode    string
	Name    string
	Allowed []string
}

// OutputFormat is a structured-output request: Type "json_schema" (Schema
// set, Name and Strict optional) or "json_object".
type OutputFormat struct {
	Type   string
	Name   string
	Schema json.RawMessage
	Strict *bool
}

// Request is a protocol-neutral generation request.
type Request struct {
	Model           string
	System          []string
	Messages        []Message
	MaxTokens       int64
	Temperature     *float64
	TopP            *float64
	Stop            []string
	Stream          bool
	Tools           []Tool
	ToolChoice      *ToolChoice
	ReasoningEffort string
	ThinkingBudget  int64
	// HideThinking: the client asked for no thinking text (messages
	// thinking.display "omitted").
	HideThinking bool
	// ParallelToolCalls is nil when the client did not say.
	ParallelToolCalls *bool
	OutputFormat      *OutputFormat
	User              string
	// CacheControl reports that a messages request marked a cache
	// breakpoint.
	CacheControl bool
}

// LastUserText returns the text of the last user message.
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == PartText || p.Type == PartToolResult {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// Response is a protocol-neutral complete generation.
type Response struct {
	ID           string
	Model        string
	Created      int64
	Parts        []Part
	Stop         StopReason
	StopSequence string
	Usage        Usage
}

// StreamEventKind is the kind of a neutral stream event.
type StreamEventKind uint8

// Neutral stream event kinds. A well-formed stream is Start, then per content
// block BlockStart, Delta*, BlockStop, then Finish; Error may end it early.
const (
	EvStart StreamEventKind = iota
	EvBlockStart
	EvDelta
	EvBlockStop
	EvFinish
	EvError
)

// StreamEvent is one protocol-neutral stream event.
type StreamEvent struct {
	Kind StreamEventKind
	// Index is the content block's position in the message (0, 1, ...).
	Index int
	// Part is the block kind on EvBlockStart (text, tool call, thinking).
	Part PartType
	// ID is the message ID on EvStart, the tool call ID on EvBlockStart.
	// Name is the tool's name on EvBlockStart of a tool call; Namespace and
	// Custom are the client's namespace and freeform flag of that tool
	// (set by the StreamTranslator from its ToolMap).
	ID        string
	Name      string
	Namespace string
	Custom    bool
	// Redacted, on EvBlockStart of a thinking block, makes it a redacted
	// thinking block with that opaque data (no deltas follow).
	Redacted string
	// Signature, on an EvDelta of a thinking block, is (a piece of) its
	// signature; Text is then empty.
	Signature string
	// Text is the delta (text, tool arguments JSON or thinking).
	Text string
	// Stop, StopSequence and Usage are set on EvFinish (Usage possibly
	// partially on EvStart).
	Stop         StopReason
	StopSequence string
	Usage        Usage
	// UsageReported tells whether Usage on EvFinish came from the upstream.
	UsageReported bool
	// ErrStatus and Message describe an EvError: ErrStatus is the HTTP
	// status the error stands for, whose type each client protocol names by
	// its family's table (apierr), so a translated stream never carries the
	// other family's type.
	ErrStatus int
	Message   string
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns prefix followed by 24 random base62 characters.
func NewID(prefix string) string {
	b := make([]byte, len(prefix)+24)
	copy(b, prefix)
	for i := len(prefix); i < len(b); i++ {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// effortBudget maps a reasoning effort to a messages thinking budget.
func effortBudget(effort string) int64 {
	switch effort {
	case "minimal", "low":
		return 1024
	case "medium":
		return 4096
	case "high":
		return 16384
	case "xhigh", "max":
		return 32768
	}
	return 0
}

// openAIEffort is an effort as the OpenAI protocols name it: Anthropic's
// "max" is their "high" ("xhigh" is not accepted by every model).
func openAIEffort(effort string) string {
	if effort == "max" {
		return "high"
	}
	return effort
}

// budgetEffort maps a messages thinking budget to a reasoning effort.
func budgetEffort(budget int64) string {
	switch {
	case budget <= 0:
		return ""
	case budget < 2048:
		return "low"
	case budget < 8192:
		return "medium"
	}
	return "high"
}

// splitDataURL splits "data:<mt>;base64,<data>".
func splitDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return "", "", false
	}
	return mediaType, data, true
}

func imageURL(p Part) string {
	if p.ImageURL != "" {
		return p.ImageURL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

func validJSONOr(s, def string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage(def)
	}
	return json.RawMessage(s)
}

// compactJSONOr is raw without insignificant whitespace, or def when raw is
// not JSON: a tool call's arguments become a string in the OpenAI protocols.
func compactJSONOr(raw json.RawMessage, def string) string {
	if len(raw) == 0 {
		return def
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return def
	}
	return b.String()
}

// rawString decodes a JSON value that is a string, or returns "" for null or
// absent.
func rawString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
	}
	return "", false
}

// ResponseEvents expresses a complete response as a neutral event sequence
// (start, one block per part, finish with its usage).
func ResponseEvents(r *Response) []StreamEvent {
	evs := make([]StreamEvent, 0, 2+3*len(r.Parts))
	evs = append(evs, StreamEvent{Kind: EvStart, ID: r.ID, Usage: Usage{InputTokens: r.Usage.InputTokens, CacheReadTokens: r.Usage.CacheReadTokens, CacheWriteTokens: r.Usage.CacheWriteTokens}})
	i := 0
	for _, p := range r.Parts {
		var text string
		switch p.Type {
		case PartText, PartThinking:
			text = p.Text
		case PartToolCall:
			text = p.Arguments
		default:
			continue
		}
		evs = append(evs, StreamEvent{Kind: EvBlockStart, Index: i, Part: p.Type, ID: p.ID, Name: p.Name, Redacted: p.Redacted})
		if text != "" {
			evs = append(evs, StreamEvent{Kind: EvDelta, Index: i, Text: text})
		}
		if p.Type == PartThinking && p.Signature != "" {
			evs = append(evs, StreamEvent{Kind: EvDelta, Index: i, Signature: p.Signature})
		}
		evs = append(evs, StreamEvent{Kind: EvBlockStop, Index: i})
		i++
	}
	stop := r.Stop
	if stop == "" {
		stop = StopEndTurn
	}
	return append(evs, StreamEvent{Kind: EvFinish, Stop: stop, StopSequence: r.StopSequence, Usage: r.Usage, UsageReported: true})
}
