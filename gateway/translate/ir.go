package translate

import (
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
	// Signature is the messages protocol's thinking signature.
	Signature string
	// ImageURL is an image given by URL; MediaType and Data an inline
	// base64 image.
	ImageURL  string
	MediaType string
	Data      string
	// ID is a tool call's ID, or for a tool result the ID of the call.
	ID string
	// Name and Arguments (JSON text) describe a tool call.
	Name      string
	Arguments string
	// IsError marks a failed tool result.
	IsError bool
}

// Message is one conversation turn. Role is "user" or "assistant"; tool
// results are user parts.
type Message struct {
	Role  string
	Parts []Part
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ToolChoice is the tool selection policy: Mode "auto", "none", "required"
// or "tool" (then Name says which).
type ToolChoice struct {
	Mode string
	Name string
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
	User            string
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
	ID   string
	Name string
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
	}
	return 0
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
		evs = append(evs, StreamEvent{Kind: EvBlockStart, Index: i, Part: p.Type, ID: p.ID, Name: p.Name})
		if text != "" {
			evs = append(evs, StreamEvent{Kind: EvDelta, Index: i, Text: text})
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
