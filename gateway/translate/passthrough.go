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
				var u mUsage
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
				var u mUsage
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
		if bytes.Contains(ev.Data, keyUsage) {
			if raw, ok := FieldRaw(ev.Data, "usage"); ok && string(raw) != "null" {
				var u cUsage
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
		if bytes.Contains(ev.Data, keyModel) {
			ev.Data = t.patchModel(ev.Data, "model")
		}
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
				var u rUsage
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
	s, e, ok := fieldSpan(data, keys)
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
