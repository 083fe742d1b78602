package batches

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const chat = "/v1/chat/completions"

func line(id, url, body string) string {
	return `{"custom_id":"` + id + `","method":"POST","url":"` + url + `","body":` + body + "}\n"
}

func parse(in string) ([]Line, int64, error) {
	var got []Line
	n, err := ParseInput(strings.NewReader(in), chat, MaxLines, func(l Line) error { got = append(got, l); return nil })
	return got, n, err
}

func TestParseInput(t *testing.T) {
	g := NewWithT(t)
	in := line("a", chat, `{"model":"m","messages":[]}`) + "\n  \n" + line("b", chat, `{"model":"m"}`)
	got, n, err := parse(strings.TrimSuffix(in, "\n")) // no final newline
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(2)))
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].CustomID).To(Equal("a"))
	g.Expect(got[0].Number).To(Equal(int64(1)))
	g.Expect(string(got[0].Body)).To(Equal(`{"model":"m","messages":[]}`))
	g.Expect(got[1].Number).To(Equal(int64(4)), "blank lines still count in line numbers")
}

func TestParseInputRefuses(t *testing.T) {
	ok := line("a", chat, `{}`)
	for _, tc := range []struct {
		name, in, code string
		line           int64
	}{
		{"an empty file", "\n\n", "empty_file", 0},
		{"a line that is not JSON", ok + "nope\n", "invalid_json_line", 2},
		{"no custom_id", `{"method":"POST","url":"` + chat + `","body":{}}` + "\n", "missing_required_parameter", 1},
		{"a GET", `{"custom_id":"a","method":"GET","url":"` + chat + `","body":{}}` + "\n", "invalid_request", 1},
		{"another endpoint", line("a", "/v1/embeddings", `{}`), "mismatched_endpoint", 1},
		{"a body that is not an object", line("a", chat, `[1]`), "invalid_request", 1},
		{"a repeated custom_id", ok + line("a", chat, `{}`), "duplicate_custom_id", 2},
		{"a custom_id too long", line(strings.Repeat("x", MaxCustomIDLen+1), chat, `{}`), "invalid_request", 1},
		{"a line too long", ok + line("b", chat, `{"p":"`+strings.Repeat("x", MaxLineBytes)+`"}`), "invalid_request", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := parse(tc.in)
			var ie *InputError
			g.Expect(errors.As(err, &ie)).To(BeTrue(), "got %v", err)
			g.Expect(ie.Code).To(Equal(tc.code))
			g.Expect(ie.Line).To(Equal(tc.line))
		})
	}
}

// TestParseInputTooManyLines: an OpenAI batch holds 50 000 requests, an
// Anthropic message batch 100 000, as their APIs allow.
func TestParseInputTooManyLines(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			g := NewWithT(t)
			limit := MaxLinesOf(api)
			var b strings.Builder
			for i := range limit {
				b.WriteString(line("id"+strconv.FormatInt(i, 10), chat, `{}`))
			}
			n, err := ParseInput(strings.NewReader(b.String()), chat, limit, func(Line) error { return nil })
			g.Expect(err).NotTo(HaveOccurred(), "exactly the limit")
			g.Expect(n).To(Equal(limit))
			b.WriteString(line("one-more", chat, `{}`))
			_, err = ParseInput(strings.NewReader(b.String()), chat, limit, func(Line) error { return nil })
			var ie *InputError
			g.Expect(errors.As(err, &ie) && ie.Code == "too_many_requests").To(BeTrue(), "got %v", err)
			g.Expect(ie.Line).To(Equal(limit + 1))
		})
	}
	NewWithT(t).Expect(MaxLinesOf("anthropic")).To(BeNumerically(">", MaxLinesOf("openai")))
}

func TestRequestIDIsStablePerLine(t *testing.T) {
	g := NewWithT(t)
	g.Expect(RequestID("batch_1", 3)).To(Equal(RequestID("batch_1", 3)))
	g.Expect(RequestID("batch_1", 3)).NotTo(Equal(RequestID("batch_1", 4)))
	g.Expect(RequestID("batch_1", 3)).NotTo(Equal(RequestID("batch_2", 3)))
	g.Expect(RequestID("batch_1", 3)).To(HavePrefix("batch_req_"))
	g.Expect(len(RequestID("batch_1", 3))).To(BeNumerically("<=", 64))
}

func TestOutputLines(t *testing.T) {
	g := NewWithT(t)
	l := Line{Number: 1, CustomID: "a"}
	okLine := Answered("batch_1", l, 200, []byte(`{"id":"chatcmpl-1"}`))
	g.Expect(okLine.Failed()).To(BeFalse())
	b, err := okLine.AppendJSONL(nil)
	g.Expect(err).NotTo(HaveOccurred())
	id := RequestID("batch_1", 1)
	g.Expect(string(b)).To(Equal(`{"id":"` + id + `","custom_id":"a","response":{"status_code":200,"request_id":"` + id + `","body":{"id":"chatcmpl-1"}},"error":null}` + "\n"))

	g.Expect(Answered("batch_1", l, 400, []byte(`{"error":{}}`)).Failed()).To(BeTrue())
	gone := Unanswered("batch_1", l, "batch_expired", "This request could not be executed before the completion window expired.")
	g.Expect(gone.Failed()).To(BeTrue())
	b, err = gone.AppendJSONL(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"response":null,"error":{"code":"batch_expired"`))
}
