package translate

import (
	"bytes"
	"testing"
)

// BenchmarkPassThroughChat relays one chat stream of the shape OpenAI sends
// (20 content chunks, the finish chunk and the usage chunk, every one naming
// the upstream's model) to a client that asked for another model name: the
// pass-through's work per stream, model rewrite and usage included.
//
//	go test -run '^$' -bench PassThroughChat ./gateway/translate/
func BenchmarkPassThroughChat(b *testing.B) {
	const open = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1727889870,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_f85bea6784",`
	var chunks [][]byte
	for range 20 {
		chunks = append(chunks, []byte(open+`"choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}`))
	}
	chunks = append(chunks,
		[]byte(open+`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`),
		[]byte(open+`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`))
	b.ReportAllocs()
	for b.Loop() {
		tr := NewStreamTranslator(ChatCompletions, ChatCompletions, "client-model", StreamOptions{IncludeUsage: true})
		for _, c := range chunks {
			evs, err := tr.Translate(Event{Data: c})
			if err != nil || len(evs) != 1 || !bytes.Contains(evs[0].Data, []byte(`"model":"client-model"`)) {
				b.Fatalf("%q: %v", evs, err)
			}
		}
		if u := tr.Usage(); u.OutputTokens != 20 {
			b.Fatalf("usage %+v", u)
		}
	}
}
