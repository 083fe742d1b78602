package handlers

import (
	"encoding/json"
	"testing"
)

// FuzzParseText feeds arbitrary bodies to the three text endpoints'
// validation: it never panics, accepts only JSON objects, and never yields a
// negative max_tokens (it would turn an estimate, and a reservation, negative).
func FuzzParseText(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","input":"hi","max_output_tokens":16,"previous_response_id":"resp_1"}`,
		`{"model":"m","max_tokens":-1}`, `{"model":1}`, `[]`, `null`, `{"model":"m","max_tokens":1e400}`, "\ufeff{}", ` {} `,
	} {
		for p := range 3 {
			f.Add(byte(p), []byte(s))
		}
	}
	parsers := []func([]byte) (textRequest, string){parseMessages, parseChat, parseResponses}
	f.Fuzz(func(t *testing.T, p byte, body []byte) {
		if len(body) > 64<<10 {
			return
		}
		req, msg := parsers[int(p)%3](body)
		if msg != "" {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			t.Fatalf("accepted a body that is not a JSON object: %q", body)
		}
		if req.MaxTokens < 0 {
			t.Fatalf("negative max tokens %d from %q", req.MaxTokens, body)
		}
	})
}
