package translate

import (
	"bytes"
	"io"
	"strconv"
)

// Protocol names a text-generation wire protocol.
type Protocol string

// The protocols the gateway speaks and translates between.
const (
	Messages        Protocol = "messages"
	ChatCompletions Protocol = "chat_completions"
	Responses       Protocol = "responses"
	// Gemini is Google's generateContent API. It is an upstream protocol
	// only: no client speaks it to the gateway, so it is not Valid.
	Gemini Protocol = "gemini"
	// Bedrock is Amazon Bedrock's Converse API, an upstream protocol only.
	Bedrock Protocol = "bedrock"
)

// Valid reports whether p is one of the protocols clients speak.
func (p Protocol) Valid() bool {
	return p == Messages || p == ChatCompletions || p == Responses
}

// Usage is the token accounting of one generation, in one shape for every
// protocol.
//
// InputTokens counts input tokens that were neither read from nor written to
// a prompt cache (Anthropic's input_tokens; OpenAI's prompt_tokens minus
// cached_tokens). A nil pointer means the upstream did not report the value.
// ReasoningTokens is informational: reasoning is already part of OutputTokens.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     *int64
	CacheWriteTokens    *int64
	ReportedTotalTokens *int64
	ReasoningTokens     int64
}

// nonNegative clamps every count at zero. An upstream that reports a
// negative count (or more cached tokens than prompt tokens) must never turn
// a charge into a credit.
func (u Usage) nonNegative() Usage {
	clamp := func(p *int64) *int64 {
		if p != nil && *p < 0 {
			return ptr[int64](0)
		}
		return p
	}
	u.InputTokens, u.OutputTokens, u.ReasoningTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0), max(u.ReasoningTokens, 0)
	u.CacheReadTokens, u.CacheWriteTokens, u.ReportedTotalTokens = clamp(u.CacheReadTokens), clamp(u.CacheWriteTokens), clamp(u.ReportedTotalTokens)
	return u
}

// PromptTokens is every input token: uncached, cache read and cache write
// (OpenAI's prompt_tokens).
func (u Usage) PromptTokens() int64 {
	return u.InputTokens + deref(u.CacheReadTokens) + deref(u.CacheWriteTokens)
}

// TotalTokens is PromptTokens plus OutputTokens.
func (u Usage) TotalTokens() int64 { return u.PromptTokens() + u.OutputTokens }

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// Event is one server-sent event. Name is the SSE "event:" field (empty for
// chat completions, which sends data lines only); Data is the payload of the
// "data:" line(s) without the prefix.
type Event struct {
	Name string
	Data []byte
}

// DoneEvent is the chat-completions stream terminator `data: [DONE]`.
var DoneEvent = Event{Data: []byte("[DONE]")}

// IsDone reports whether e is the chat-completions terminator.
func (e Event) IsDone() bool { return string(e.Data) == "[DONE]" }

// AppendSSE appends e in wire form: "event: <name>\n" (when named), then
// "data: <line>\n" for each line of Data, then a blank line. Data read from
// several data lines has them joined by "\n"; each goes back on a data line
// of its own, or the receiver would take the rest for other fields and lose
// it.
func (e Event) AppendSSE(dst []byte) []byte {
	if e.Name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, e.Name...)
		dst = append(dst, '\n')
	}
	data := e.Data
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i+1]...)
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}

// WriteTo writes e in wire form to w.
func (e Event) WriteTo(w io.Writer) (int64, error) {
	var stack [512]byte
	n, err := w.Write(e.AppendSSE(stack[:0]))
	return int64(n), err
}

// String returns the wire form, for tests and debugging.
func (e Event) String() string { return string(e.AppendSSE(nil)) }

// StopReason is the protocol-neutral reason a generation ended. Its values
// are the messages protocol's.
type StopReason string

// Stop reasons.
const (
	StopEndTurn       StopReason = "end_turn"
	StopMaxTokens     StopReason = "max_tokens"
	StopSequence      StopReason = "stop_sequence"
	StopToolUse       StopReason = "tool_use"
	StopContentFilter StopReason = "refusal"
)

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
