package translate

import (
	"encoding/json"
	"strings"
)

// normalize replaces generated values (IDs, timestamps) with placeholders so
// outputs compare exactly: every string under a key named id, item_id or
// created*, and IDs of our prefixes, become their prefix plus "X".
func normalize(data []byte) string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return "INVALID JSON: " + string(data)
	}
	v = normalizeValue("", v)
	out, _ := json.Marshal(v)
	return string(out)
}

func normalizeValue(key string, v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalizeValue(k, x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = normalizeValue(key, x)
		}
		return t
	case string:
		if key == "id" || key == "item_id" {
			for _, p := range []string{"msg_", "chatcmpl-", "resp_", "fc_", "rs_"} {
				if strings.HasPrefix(t, p) {
					return p + "X"
				}
			}
		}
		return t
	case float64:
		if key == "created" || key == "created_at" {
			return 0.0
		}
		return t
	}
	return v
}

// renderEvents renders events as "name data" lines with normalized data.
func renderEvents(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.IsDone() {
			b.WriteString("[DONE]\n")
			continue
		}
		if e.Name != "" {
			b.WriteString(e.Name)
			b.WriteByte(' ')
		}
		b.WriteString(normalize(e.Data))
		b.WriteByte('\n')
	}
	return b.String()
}

// translateAll feeds SSE text through a StreamTranslator and renders the
// client events.
func translateAll(from, to Protocol, sse string, opts StreamOptions) (string, *StreamTranslator, error) {
	t := NewStreamTranslator(from, to, "client-model", opts)
	rd := NewSSEReader(strings.NewReader(sse))
	var all []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		out, err := t.Translate(ev)
		if err != nil {
			return "", t, err
		}
		for _, o := range out {
			all = append(all, Event{Name: o.Name, Data: append([]byte(nil), o.Data...)})
		}
	}
	all = append(all, t.Finish()...)
	return renderEvents(all), t, nil
}
