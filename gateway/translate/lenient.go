package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Requests are read leniently: the handler in front checks only that a body
// is a JSON object with a string model, so a translated request may carry
// any role, block, item or tool type, and fields of any type. Decoding
// fails only when the body cannot be read as the protocol at all (not a
// JSON object, or its conversation not an array); a value of the wrong type
// reads as absent, and an element of a kind the neutral form has no place
// for is mapped by the rules of docs/protocol-mapping.md or dropped.

// unmarshalLenient decodes data into v as json.Unmarshal does, except that
// values of the wrong type are skipped (encoding/json leaves their fields
// as they were and decodes the rest). It reports whether any was skipped.
func unmarshalLenient(data []byte, v any) (skipped bool, err error) {
	err = json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return true, nil
	}
	return false, err
}

// requireObject fails unless body is a JSON object.
func requireObject(proto string, body []byte) error {
	if i := skipWS(body, 0); i >= len(body) || body[i] != '{' {
		return fmt.Errorf("%s request: %w", proto, errNotObject)
	}
	return nil
}

// requireArray fails when the member key of body is present, not null and
// not an array.
func requireArray(proto string, body []byte, key string) error {
	raw, ok := FieldRaw(body, key)
	if !ok || len(raw) == 0 || raw[0] == '[' || string(raw) == "null" {
		return nil
	}
	return fmt.Errorf("%s request: %s is not an array", proto, key)
}

// numberField re-reads an optional number after a lenient decode skipped
// a value: encoding/json allocates the pointer before it finds the value is
// not a number, so a skipped value would read as zero.
func numberField(body []byte, p *float64, keys ...string) *float64 {
	if p == nil {
		return nil
	}
	raw, ok := FieldRaw(body, keys...)
	if !ok {
		return nil
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		return nil
	}
	return p
}

// clamp bounds an optional number to [lo, hi].
func clamp(p *float64, lo, hi float64) *float64 {
	if p == nil {
		return nil
	}
	v := min(max(*p, lo), hi)
	return &v
}

// anyBlock is a content block or part of any protocol, read for its text:
// the fallback rule for blocks the neutral form has no kind for.
type anyBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Refusal string          `json:"refusal"`
	Source  *anySource      `json:"source"`
	Content json.RawMessage `json:"content"`
}

type anySource struct {
	Type    string          `json:"type"`
	Data    string          `json:"data"`
	Content json.RawMessage `json:"content"`
}

// text is a block's text by the one rule for blocks without an equivalent:
// its text (or refusal), else a text document's source data, else the text
// of its content (a string or blocks, read by the same rule). Empty means
// the block carries no text and is dropped.
func (b *anyBlock) text(depth int) string {
	switch {
	case b.Text != "":
		return b.Text
	case b.Refusal != "":
		return b.Refusal
	case b.Source != nil && b.Source.Type == "text":
		return b.Source.Data
	case b.Source != nil && b.Source.Type == "content":
		return contentText(b.Source.Content, depth+1)
	}
	return contentText(b.Content, depth+1)
}

// maxContentDepth bounds the nesting contentText follows.
const maxContentDepth = 4

// contentText is the text of a content value: a string, or the text of each
// block (by anyBlock.text) joined.
func contentText(raw json.RawMessage, depth int) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	if depth > maxContentDepth || len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	var blocks []anyBlock
	if _, err := unmarshalLenient(raw, &blocks); err != nil {
		return ""
	}
	var out []byte
	for i := range blocks {
		out = append(out, blocks[i].text(depth)...)
	}
	return string(out)
}

// systemPrompts is every system text of r in order, for targets with one
// top-level system prompt: the leading ones, then those of the system
// messages later in the conversation.
func (r *Request) systemPrompts() []string {
	out, copied := r.System, false
	for _, m := range r.Messages {
		if m.Role != "system" {
			continue
		}
		if !copied {
			out, copied = append([]string(nil), r.System...), true
		}
		if t := partsText(m.Parts); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// turns is r's conversation without its system messages.
func (r *Request) turns() []Message {
	n := 0
	for _, m := range r.Messages {
		if m.Role != "system" {
			n++
		}
	}
	if n == len(r.Messages) {
		return r.Messages
	}
	out := make([]Message, 0, n)
	for _, m := range r.Messages {
		if m.Role != "system" {
			out = append(out, m)
		}
	}
	return out
}

// partsText joins the text parts of a system message.
func partsText(ps []Part) string {
	if len(ps) == 1 {
		return ps[0].Text
	}
	var b []byte
	for _, p := range ps {
		if p.Type != PartText || p.Text == "" {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\n\n"...)
		}
		b = append(b, p.Text...)
	}
	return string(b)
}

// addSystem records a system or developer message: leading ones (before
// any turn) join r.System, later ones stay in the conversation.
func (r *Request) addSystem(parts []Part) {
	if len(r.Messages) == 0 {
		if t := partsText(parts); t != "" {
			r.System = append(r.System, t)
		}
		return
	}
	if len(parts) > 0 {
		r.Messages = append(r.Messages, Message{Role: "system", Parts: parts})
	}
}
