package upstream

import (
	"errors"
	"io"
	"testing"

	"github.com/modelgate/modelgate/gateway/translate"
)

// FuzzStreamFromBody: a complete upstream answer of any shape, replayed as a
// client stream of any protocol, never panics, ends, and never reports a
// negative usage; an upstream error body of any shape gives a message.
func FuzzStreamFromBody(f *testing.F) {
	for i, s := range []string{
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}`,
		`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":-9}}`,
		`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}`,
		`{"error":{"type":"overloaded_error","message":"busy"}}`, `{}`, `[]`, `nul`,
	} {
		for p := range 9 {
			f.Add(byte(p+i), []byte(s))
		}
	}
	protos := []Protocol{Messages, ChatCompletions, Responses}
	f.Fuzz(func(t *testing.T, p byte, raw []byte) {
		if len(raw) > 64<<10 {
			return
		}
		up, client := protos[int(p)%3], protos[int(p/3)%3]
		_ = textStatusError(500, raw).Message
		u := estimateUsage(up, raw, Usage{})
		if u.InputTokens < 0 || u.OutputTokens < 0 {
			t.Fatalf("negative estimate %+v", u)
		}
		s, err := streamFromBody(raw, up, client, "m", translate.StreamOptions{IncludeUsage: true}, nil)
		if err != nil {
			return
		}
		defer s.Close()
		for range 1 << 16 {
			if _, err := s.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					return
				}
				if us := s.Usage(); us.InputTokens < 0 || us.OutputTokens < 0 {
					t.Fatalf("negative usage %+v from %q", us, raw)
				}
				return
			}
		}
		t.Fatalf("the replayed stream of %d bytes does not end", len(raw))
	})
}
