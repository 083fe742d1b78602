package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets below run for a few seconds each in `make test` (make
// fuzz). Properties: nothing panics on any input, successful output is valid
// JSON, and output stays bounded by the input (no unbounded growth from a
// small request or stream).

var (
	protocols    = []Protocol{Messages, ChatCompletions, Responses}
	upstreamOnly = []Protocol{Gemini, Bedrock}
)

// pair picks a protocol pair from a fuzzed byte.
func pair(b byte) (Protocol, Protocol) {
	return protocols[int(b)%3], protocols[int(b/3)%3]
}

// maxFuzzInput caps what a target looks at: the gateway caps bodies too,
// and the bound keeps each run fast.
const maxFuzzInput = 64 << 10

// bounded is the most output an input of n bytes may produce: translation
// adds structure (ids, envelopes) but never repeats the input.
func bounded(n int) int { return 4*n + 8<<10 }

func FuzzTranslateRequest(f *testing.F) {
	for i, s := range []string{fixtureMessagesRequest, fixtureChatRequest, fixtureResponsesRequest, `{}`, `{"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
		`{"input":[{"type":"function_call_output","output":null}]}`, `{"model":"m","max_tokens":-1,"tools":[{}]}`} {
		for b := range 9 {
			f.Add(byte(b+i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, p byte, body []byte) {
		if len(body) > maxFuzzInput {
			return
		}
		from, to := pair(p)
		// The upstream-only protocols are targets of every client protocol.
		for _, to := range []Protocol{to, upstreamOnly[int(p/9)%2]} {
			out, _, err := TranslateRequest(from, to, body, "upstream-model")
			if err != nil {
				continue
			}
			// A body of the client's own protocol is forwarded byte for byte
			// but for the model (the handler has parsed it already).
			if !json.Valid(out) && json.Valid(body) {
				t.Fatalf("%s→%s: invalid JSON %q from %q", from, to, out, body)
			}
			if len(out) > bounded(len(body)) {
				t.Fatalf("%s→%s: %d bytes out of %d in", from, to, len(out), len(body))
			}
		}
	})
}

func FuzzTranslateResponse(f *testing.F) {
	for i, s := range []string{fixtureMessagesResponse, fixtureChatResponse, fixtureResponsesResponse, `{}`, `{"choices":[]}`,
		`{"content":[{"type":"tool_use","input":null}]}`, `{"output":[{"type":"message","content":[{}]}],"usage":{}}`} {
		for b := range 9 {
			f.Add(byte(b+i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, p byte, body []byte) {
		if len(body) > maxFuzzInput {
			return
		}
		from, to := pair(p)
		out, usage, err := TranslateResponse(from, to, body, "client-model", nil)
		if err != nil {
			return
		}
		if !json.Valid(out) && json.Valid(body) {
			t.Fatalf("%s→%s: invalid JSON %q from %q", from, to, out, body)
		}
		if len(out) > bounded(len(body)) {
			t.Fatalf("%s→%s: %d bytes out of %d in", from, to, len(out), len(body))
		}
		if usage.InputTokens < 0 || usage.OutputTokens < 0 {
			t.Fatalf("%s→%s: negative usage %+v from %q", from, to, usage, body)
		}
	})
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{fixtureMessagesStream, fixtureChatStream, fixtureResponsesStream, "data: x\n\n", "event: a\ndata: 1\ndata: 2\n\n",
		": comment\r\ndata:\r\n\r\n", "data: unterminated", "event: only\n\n", "\n\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzInput {
			return
		}
		r := NewSSEReader(bytes.NewReader(in))
		total := 0
		for range len(in) + 1 { // every event consumes at least one byte
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v on %q", err, in)
				}
				return
			}
			total += len(ev.Data)
			if total > len(in) {
				t.Fatalf("%d data bytes from %d input bytes", total, len(in))
			}
		}
		t.Fatalf("no end after %d events on %q", len(in)+1, in)
	})
}

func FuzzStreamTranslate(f *testing.F) {
	for i, s := range []string{fixtureMessagesStream, fixtureChatStream, fixtureResponsesStream, "data: {}\n\n", "data: [DONE]\n\n",
		"event: message_delta\ndata: {\"usage\":{\"output_tokens\":-5}}\n\n", "event: response.completed\ndata: {\"response\":null}\n\n"} {
		for b := range 9 {
			f.Add(byte(b+i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, p byte, in []byte) {
		if len(in) > maxFuzzInput {
			return
		}
		from, to := pair(p)
		tr := NewStreamTranslator(from, to, "client-model", StreamOptions{IncludeUsage: p&1 == 1})
		r := NewSSEReader(bytes.NewReader(in))
		out := 0
		events := 0
		check := func(evs []Event) {
			for _, ev := range evs {
				events++
				out += len(ev.Data)
				// Translated events are built by the encoder and must be JSON;
				// a same-protocol stream is relayed as the upstream sent it.
				if from != to && string(ev.Data) != "[DONE]" && !json.Valid(ev.Data) {
					t.Fatalf("%s→%s: invalid JSON event %q from %q", from, to, ev.Data, in)
				}
			}
		}
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			evs, err := tr.Translate(ev)
			if err != nil {
				break
			}
			check(evs)
		}
		check(tr.Finish())
		// Each input event may expand into a few client events of bounded
		// size (envelopes, block starts and stops, a closing error).
		if limit := 64*len(in) + 64<<10; out > limit {
			t.Fatalf("%s→%s: %d bytes in %d events from %d input bytes", from, to, out, events, len(in))
		}
		u := tr.Usage()
		if u.InputTokens < 0 || u.OutputTokens < 0 {
			t.Fatalf("%s→%s: negative usage %+v", from, to, u)
		}
	})
}

// chunkReader hands out its data a few bytes at a time, so events straddle
// buffer boundaries the way network reads do.
type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.size, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// FuzzSSERoundTrip reads events in small chunks and checks that look never
// promises an event Next cannot return without reading, that Next reads
// nothing when WouldWait says it would not wait, and that every event
// written back (pass-through streams do that) reads as the same event.
func FuzzSSERoundTrip(f *testing.F) {
	for _, s := range []string{fixtureMessagesStream, fixtureChatStream, fixtureResponsesStream, "data: a\ndata: b\n\n",
		"data: {\ndata: }\n\n", "data: x\r\r\n", "data: a\rdata: b\r\r", "event: e\r\ndata: 1\r\n\r\n", "data:\n\n"} {
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		if len(in) > maxFuzzInput {
			return
		}
		src := &countingReader{r: &chunkReader{data: in, size: int(chunk) + 1}}
		r := NewSSEReader(src)
		for range len(in) + 1 {
			ready, _ := r.look()
			wait, reads := r.WouldWait(), src.reads
			ev, err := r.Next()
			switch {
			case ready && err != nil:
				t.Fatalf("look promised an event, Next returned %v on %q", err, in)
			case !wait && src.reads != reads:
				t.Fatalf("WouldWait said no, Next read %d times on %q", src.reads-reads, in)
			}
			if err != nil {
				return
			}
			wire := ev.String()
			back, err := NewSSEReader(strings.NewReader(wire)).Next()
			if err != nil || back.Name != ev.Name || !bytes.Equal(back.Data, ev.Data) {
				t.Fatalf("event %q/%q is written as %q, which reads as %q/%q (%v)", ev.Name, ev.Data, wire, back.Name, back.Data, err)
			}
		}
		t.Fatalf("no end after %d events on %q", len(in)+1, in)
	})
}

// FuzzSSEReaderMatchesSpec reads a stream in chunks of any size and holds
// the events to what the SSE specification's parsing makes of the whole
// input at once: lines end at CRLF, LF or a lone CR; "data" lines join with
// LF; "event" names the event; a blank line dispatches an event with data;
// the stream's end dispatches a last event that has data.
func FuzzSSEReaderMatchesSpec(f *testing.F) {
	for _, s := range []string{fixtureMessagesStream, fixtureChatStream, "data: a\rdata: b\r\r", "data: " + strings.Repeat("y", 3000) + "\r\n\r\n",
		"event: e\ndata\ndata:x\n\n", "data: tail"} {
		f.Add([]byte(s), uint16(7))
	}
	// Lines longer than every buffer, read a few bytes and a few KiB at a time.
	long := "data: " + strings.Repeat("z", 9000) + "\r\ndata: b\r\n\r\nevent: x\ndata: " + strings.Repeat("w", 5000) + "\n\n"
	f.Add([]byte(long), uint16(2))
	f.Add([]byte(long), uint16(3000))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint16) {
		if len(in) > maxFuzzInput {
			return
		}
		want := specEvents(in)
		r := NewSSEReader(&chunkReader{data: in, size: int(chunk) + 1})
		var got []string
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			got = append(got, ev.Name+"\x00"+string(ev.Data))
		}
		if strings.Join(got, "\x01") != strings.Join(want, "\x01") {
			t.Fatalf("read in chunks of %d, %q gives %q, want %q", int(chunk)+1, in, got, want)
		}
	})
}

// specEvents parses a whole SSE stream the specification's way.
func specEvents(in []byte) []string {
	text := strings.ReplaceAll(strings.ReplaceAll(string(in), "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(text, "\n")
	var out []string
	var name, data string
	hasData := false
	for i, line := range lines {
		last := i == len(lines)-1
		if line == "" {
			if !last && hasData {
				out = append(out, name+"\x00"+data)
			}
			if !last {
				name, data, hasData = "", "", false
			}
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "event":
			name = value
		}
	}
	if hasData {
		out = append(out, name+"\x00"+data)
	}
	return out
}

// FuzzChatUsageMatchesDecoder holds the chat usage reader (decodeChatUsage,
// which walks the usual shape without the decoder) to json.Unmarshal into
// the same struct: the same verdict and the same counts, and the walk
// itself never claims a shape the decoder reads otherwise.
func FuzzChatUsageMatchesDecoder(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}`,
		`{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":8,"accepted_prediction_tokens":0}}`,
		`{"prompt_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}`,
		`{"prompt_tokens_details":{"cached_tokens":null}}`, `{"Prompt_Tokens":5}`, `{"prompt_tokens":1,"prompt_tokens":2}`,
		`{"prompt_tokens":1.0}`, `{"prompt_tokens":1e2}`, `{"prompt_tokens":"1"}`, `{"prompt_tokens":99999999999999999999}`,
		`{"prompt_tokens":-3,"x":{"prompt_tokens":"no"}}`, `{"prompt\u005ftokens":7}`, `{"prompt_tokens_details":{"CACHED_TOKENS":1}}`,
		`{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{}}`, `{"prompt_tokens_details":5}`, `null`, `[]`, `{`, ` {"total_tokens" : 3 } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > maxFuzzInput {
			return
		}
		var want chatUsage
		decErr := json.Unmarshal(raw, &want)
		var walked chatUsage
		if walkChatUsage(raw, &walked) && (decErr != nil || !reflect.DeepEqual(walked, want)) {
			t.Fatalf("walk read %+v, the decoder %+v (%v), from %q", walked, want, decErr, raw)
		}
		var got chatUsage
		ok := decodeChatUsage(raw, &got)
		if ok != (decErr == nil) || (ok && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decodeChatUsage %v %+v, the decoder %v %+v, from %q", ok, got, decErr, want, raw)
		}
	})
}

// FuzzModelShortcut holds the pass-through's shortcut to a chunk's model
// (modelSpan, which reuses where the previous chunk's model began) to the
// walk it skips: a chunk relayed after another must come out exactly as it
// does relayed alone.
func FuzzModelShortcut(f *testing.F) {
	open := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,`
	for _, p := range [][2]string{
		{open + `"model":"up-1","choices":[]}`, open + `"model":"up-1","choices":[{"delta":{"content":"x"}}]}`},
		{open + `"model":"up-1"}`, open + `"model":"up-12345"}`},
		{open + `"model":"up-1"}`, open + `"model":null}`},
		{open + `"model":"up-1"}`, open + `"model":"up-1`},
		{open + `"model":"up-1"}`, open + `"model":"a\"b"}`},
		{`{"model" : "up"}`, `{"model" : {"x":"y"}, "model":"z"}`},
		{`{"x":{"model":"in"},"model":"out"}`, `{"x":{"model":"in"},"model":"other"}`},
		{`{"model":"a"}`, `{"mode":"a","model":"b"}`},
		{`{"model":"a"}`, `{"model":"client-model"}`},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	relay := func(tr *StreamTranslator, data []byte) string {
		evs, err := tr.Translate(Event{Data: data})
		if err != nil || len(evs) == 0 {
			return fmt.Sprint("error ", err)
		}
		return string(evs[0].Data)
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		if len(first)+len(second) > maxFuzzInput {
			return
		}
		after := NewStreamTranslator(ChatCompletions, ChatCompletions, "client-model", StreamOptions{IncludeUsage: true})
		relay(after, first)
		got := relay(after, second)
		alone := NewStreamTranslator(ChatCompletions, ChatCompletions, "client-model", StreamOptions{IncludeUsage: true})
		if want := relay(alone, second); got != want {
			t.Fatalf("after %q, %q relayed as %q; alone as %q", first, second, got, want)
		}
	})
}

// FuzzNullUsageShortcut holds endsWithNullUsage, which lets a chat chunk
// skip the walk to its usage, to that walk: whenever it says the usage is
// null, FieldRaw finds no usage or a null one.
func FuzzNullUsageShortcut(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"delta":{"content":"x"}}],"usage":null}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":1}}`,
		`{"usage":{"prompt_tokens":1},"usage":null}`,
		`{"us\u0061ge":{"prompt_tokens":1},"usage":null}`,
		`{"x":{"usage":null}}`, `{"a":"\"usage":null}`, ` { "usage" : null } `, `{"usage":nullx}`, `"usage":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !endsWithNullUsage(data) {
			return
		}
		if raw, ok := FieldRaw(data, "usage"); ok && string(raw) != "null" {
			t.Fatalf("%q: the shortcut says null usage, the walk finds %q", data, raw)
		}
	})
}

func TestNullUsageShortcut(t *testing.T) {
	for s, want := range map[string]bool{
		`{"id":"c","choices":[{"delta":{"content":"x"}}],"usage":null}`: true,
		` { "usage" : null } ` + "\n":                                   true,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":1}}`:           false,
		`{"usage":{"prompt_tokens":1},"usage":null}`:                    false,
		`{"us\u0061ge":{"prompt_tokens":1},"usage":null}`:               false,
		`{"id":"c","usage":null,"choices":[]}`:                          false,
	} {
		if got := endsWithNullUsage([]byte(s)); got != want {
			t.Errorf("endsWithNullUsage(%s) = %v, want %v", s, got, want)
		}
	}
}
