package handlers

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseChat is the validation of a chat completion body on the
// request path: a short conversation, and a long one with a system prompt.
func BenchmarkParseChat(b *testing.B) {
	short := []byte(`{"model":"bench-chat","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":64,"temperature":0.7}`)
	var turns []string
	for i := range 40 {
		role := []string{"user", "assistant"}[i%2]
		turns = append(turns, fmt.Sprintf(`{"role":%q,"content":%q}`, role, strings.Repeat("word ", 60)))
	}
	long := []byte(`{"model":"bench-chat","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":1024,` +
		`"messages":[{"role":"system","content":"You are terse."},` + strings.Join(turns, ",") + `]}`)
	for _, c := range []struct {
		name string
		body []byte
	}{{"short", short}, {"40-turns", long}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, msg := parseChat(c.body); msg != "" {
					b.Fatal(msg)
				}
			}
		})
	}
}
