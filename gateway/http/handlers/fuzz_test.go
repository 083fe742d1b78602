package handlers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseText feeds arbitrary bodies to the three text endpoints'
// reading: it never panics, accepts only JSON objects with a string model,
// and never yields a negative output cap (it would turn an estimate, and a
// reservation, negative).
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
		var model string
		if json.Unmarshal(body, &obj) != nil || json.Unmarshal(obj["model"], &model) != nil || model != req.Model {
			t.Fatalf("accepted a body that is not a JSON object with a string model %q: %q", req.Model, body)
		}
		if req.MaxTokens < 0 {
			t.Fatalf("negative max tokens %d from %q", req.MaxTokens, body)
		}
	})
}

// FuzzFieldsMatchDecoder holds the request scanner (decodeObject and the
// field readers, which read the body without decoding it) to what
// encoding/json makes of the same body: the same verdict on the document
// and the same member values.
func FuzzFieldsMatchDecoder(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"max_tokens":64,"temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m\u00e9","model":"n","stream":false,"max_tokens":"12","messages":[{"ROLE":"user"},{"role":null},{"r\u006fle":"tool"}]}`,
		`{"model":"\xff","max_tokens":1.0,"temperature":"1","messages":[1,{"role":2},{"role":"user","role":null}]}`,
		`{"a":{"b":[1,{"c":"}"}]},"model" : "x" , "messages":[ ]}`, `{"model":"m"} x`, `{"model":`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fs, msg := decodeObject(body)
		var obj map[string]json.RawMessage
		decErr := json.Unmarshal(body, &obj)
		if (msg == "") != (decErr == nil) {
			t.Fatalf("decodeObject says %q, the decoder %v, for %q", msg, decErr, body)
		}
		if msg != "" {
			return
		}
		for name, want := range obj {
			if strings.ContainsFunc(name, func(r rune) bool { return r >= utf8.RuneSelf }) {
				continue // the decoder repairs invalid UTF-8 in keys; the gateway asks for ASCII names only
			}
			if got := fs.raw(name); !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
				t.Fatalf("member %q: %q, decoder %q", name, got, want)
			}
		}
		for _, name := range []string{"model", "stream", "max_tokens", "temperature"} {
			raw, present := obj[name]
			present = present && string(bytes.TrimSpace(raw)) != "null"
			var s string
			if got, m := fs.str(name, false); present && m == "" {
				if json.Unmarshal(raw, &s) != nil || s != got {
					t.Fatalf("str %q = %q, decoder %q (%q)", name, got, s, raw)
				}
			}
			var b bool
			if got, m := fs.boolean(name); present && (m == "") != (json.Unmarshal(raw, &b) == nil) || (m == "" && got != b) {
				t.Fatalf("boolean %q = %v %q, decoder %v (%q)", name, got, m, b, raw)
			}
			var n json.Number
			if got, m := fs.integer(name, -1<<62); present && m == "" {
				if json.Unmarshal(raw, &n) != nil || n.String() == "" {
					t.Fatalf("integer %q = %d, decoder refuses %q", name, got, raw)
				}
				if want, _ := n.Int64(); want != got {
					t.Fatalf("integer %q = %d, decoder %d", name, got, want)
				}
			}
		}
	})
}
