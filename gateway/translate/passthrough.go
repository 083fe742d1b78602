package translate

import (
	"bytes"
	"encoding/json"
)

// The pass-through stream: an upstream of the client's own protocol is
// forwarded event by event, only the model rewritten and the usage observed.

var (
	keyModel = []byte(`"model"`)
	keyUsage = []byte(`"usage"`)
)

// passThrough forwards an event of the client's own protocol, rewriting only
// the model and observing usage.
func (t *StreamTranslator) passThrough(ev Event) ([]Event, error) {
	name := ev.Name
	switch t.from {
	case Messages:
		if name == "" {
			name, _ = FieldString(ev.Data, "type")
		}
		switch name {
		case "message_start":
			if raw, ok := FieldRaw(ev.Data, "message", "usage"); ok {
				var u messagesUsage
				if json.Unmarshal(raw, &u) == nil {
					t.usage = u.toUsage()
				}
			}
			ev.Data = t.patchModel(ev.Data, "message", "model")
		case "content_block_delta":
			for _, k := range [...]string{"text", "partial_json", "thinking"} {
				if raw, ok := FieldRaw(ev.Data, "delta", k); ok {
					t.deltaBytes += int64(len(raw) - 2)
					break
				}
			}
		case "message_delta":
			if raw, ok := FieldRaw(ev.Data, "usage"); ok {
				var u messagesUsage
				if json.Unmarshal(raw, &u) == nil {
					t.reported = true
					t.usage.OutputTokens = u.OutputTokens
					if u.InputTokens > 0 {
						t.usage.InputTokens = u.InputTokens
					}
					if u.CacheReadInputTokens != nil {
						t.usage.CacheReadTokens = u.CacheReadInputTokens
					}
					if u.CacheCreationInputTokens != nil {
						t.usage.CacheWriteTokens = u.CacheCreationInputTokens
					}
				}
			}
		case "message_stop", "error":
			t.done = true
		}
	case ChatCompletions:
		if ev.IsDone() {
			t.done = true
			break
		}
		if !endsWithNullUsage(ev.Data) && bytes.Contains(ev.Data, keyUsage) {
			if raw, ok := FieldRaw(ev.Data, "usage"); ok && string(raw) != "null" {
				var u chatUsage
				if decodeChatUsage(raw, &u) {
					t.usage, t.reported = u.toUsage(), true
				}
				if !t.opts.IncludeUsage {
					if ch, ok := FieldRaw(ev.Data, "choices"); ok && isEmptyArray(ch) {
						return t.out, nil
					}
				}
			}
		}
		t.deltaChunks++
		ev.Data = t.patchModel(ev.Data, "model")
	case Responses:
		if name == "" {
			name, _ = FieldString(ev.Data, "type")
		}
		switch name {
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
			if raw, ok := FieldRaw(ev.Data, "delta"); ok {
				t.deltaBytes += int64(len(raw) - 2)
			}
		case "response.completed", "response.incomplete", "response.failed":
			t.done = true
			if raw, ok := FieldRaw(ev.Data, "response", "usage"); ok && string(raw) != "null" {
				var u responsesUsage
				if json.Unmarshal(raw, &u) == nil {
					t.usage, t.reported = u.toUsage(), true
				}
			}
			ev.Data = t.patchModel(ev.Data, "response", "model")
		case "response.created", "response.in_progress":
			ev.Data = t.patchModel(ev.Data, "response", "model")
		}
	}
	t.out = append(t.out, ev)
	return t.out, nil
}

func isEmptyArray(raw []byte) bool {
	return len(bytes.TrimSpace(raw)) == 2 && raw[0] == '['
}

// patchModel rewrites the model at the path to the client's model into
// t.patched: every chunk of a stream names the model, so one buffer serves
// them all instead of a copy per chunk.
func (t *StreamTranslator) patchModel(data []byte, keys ...string) []byte {
	if t.model == "" {
		return data
	}
	s, e, ok := t.modelSpan(data, keys)
	if !ok {
		return data
	}
	if cur := data[s:e]; len(cur) == len(t.model)+2 && string(cur[1:len(cur)-1]) == t.model {
		return data
	}
	t.patched = append(t.patched[:0], data[:s]...)
	t.patched = appendJSONString(t.patched, t.model)
	t.patched = append(t.patched, data[e:]...)
	return t.patched
}

// maxModelPrefix bounds what modelSpan keeps of a chunk: the opening members
// (id, object, created) that precede the model in every chunk of a stream.
const maxModelPrefix = 256

// modelSpan is fieldSpan for the model's value, with a shortcut for a
// top-level model: a stream's chunks open alike ({"id":…,"object":…,
// "created":…,"model":…), and when a chunk begins with the same bytes as
// the one before up to where that one's model value began, the walk to the
// value would take the same steps and end at the same place, so only the
// value itself is scanned. (A nested path's walk also depends on where the
// enclosing value ends, after the value: it always walks.)
func (t *StreamTranslator) modelSpan(data []byte, keys []string) (int, int, bool) {
	if len(keys) != 1 || keys[0] != "model" {
		return fieldSpan(data, keys)
	}
	if p := t.modelPrefix; len(p) > 0 && bytes.HasPrefix(data, p) {
		if e, ok := skipValue(data, len(p)); ok {
			return len(p), e, true
		}
	}
	if !bytes.Contains(data, keyModel) {
		return 0, 0, false // no walk for a chunk that cannot name a model
	}
	s, e, ok := fieldSpan(data, keys)
	t.modelPrefix = t.modelPrefix[:0]
	if ok && s <= maxModelPrefix {
		t.modelPrefix = append(t.modelPrefix, data[:s]...)
	}
	return s, e, ok
}

var (
	nullUsage  = []byte(`null`)
	unicodeEsc = []byte(`\u`)
)

// endsWithNullUsage reports that a chat chunk's usage is null without
// walking the chunk: OpenAI sends "usage":null as the last member of every
// chunk but the last when usage is asked for, and walking a chunk's choices
// to reach it cost more than the rest of its relay. It holds when "usage"
// occurs once, as the member before the closing brace, with a null value:
// a key that reads "usage" is then that one (with no \u escape in the
// chunk no other spelling of it can exist), and a member right before the
// object's last brace is the object's own. Anything else is walked.
func endsWithNullUsage(data []byte) bool {
	rest, ok := cutSuffix(data, '}')
	if !ok {
		return false
	}
	rest = trimWSRight(rest)
	if !bytes.HasSuffix(rest, nullUsage) {
		return false
	}
	rest, ok = cutSuffix(rest[:len(rest)-len(nullUsage)], ':')
	if !ok || !bytes.HasSuffix(trimWSRight(rest), keyUsage) {
		return false
	}
	return bytes.Count(data, keyUsage) == 1 && !bytes.Contains(data, unicodeEsc)
}

// cutSuffix removes trailing whitespace and then the byte c, reporting
// whether c was there.
func cutSuffix(b []byte, c byte) ([]byte, bool) {
	b = trimWSRight(b)
	if len(b) == 0 || b[len(b)-1] != c {
		return b, false
	}
	return b[:len(b)-1], true
}

// trimWSRight removes JSON whitespace from the end of b (skipWS's
// counterpart; bytes.TrimRight builds its set of bytes on every call).
func trimWSRight(b []byte) []byte {
	for len(b) > 0 && isWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
