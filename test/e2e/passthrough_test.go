package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Same-protocol pass-through", func() {
	// A request in the upstream's own protocol reaches it byte for byte but
	// for the model, whatever fields, roles, content blocks and tool types
	// it carries (random ones here, none of which the gateway knows); the
	// client's beta headers and query go along; and the answer comes back
	// byte for byte but for the model, unknown fields and events included,
	// streamed or not. Each request is billed from the answer's usage.
	for _, p := range []struct {
		proto, path, provider string
	}{
		{"messages", "/v1/messages", "anthropic"},
		{"chat", "/v1/chat/completions", "openai"},
		{"responses", "/v1/responses", "openai"},
	} {
		for _, stream := range []bool{false, true} {
			It(fmt.Sprintf("%s stream=%v", p.proto, stream), func() {
				t := GinkgoTB()
				g := NewWithT(t)
				rec := startRecorder(t, p.proto)
				model := uniqueModel("passthrough-" + p.proto)
				textModel(t, framework.SystemNamespace, model, fakeBackend(t, "rec", p.provider, rec.URL, "up-key", "up-model"))
				acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
				rng := rand.New(rand.NewPCG(uint64(len(p.proto)), map[bool]uint64{false: 1, true: 2}[stream]))
				const requests = 12
				for i := range requests {
					body := randomRequest(rng, p.proto, model, stream)
					req, _ := http.NewRequest(http.MethodPost, stack.BaseURL+p.path+"?beta=true", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+acct.Key)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("anthropic-beta", "future-feature-2027-01-01,another-2027-02-02")
					req.Header.Set("anthropic-version", "2023-06-01")
					req.Header.Set("OpenAI-Beta", "responses_future=v9")
					resp, err := http.DefaultClient.Do(req)
					g.Expect(err).NotTo(HaveOccurred())
					answer, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "request %d: %s\n%s", i, answer, body)

					got := rec.last()
					want := strings.Replace(body, `"model":"`+model+`"`, `"model":"up-model"`, 1)
					g.Expect(got.body).To(Equal(want), "request %d reached the upstream changed", i)
					g.Expect(got.query).To(Equal("beta=true"))
					if p.provider == "anthropic" {
						g.Expect(got.header.Values("anthropic-beta")).To(ContainElement("future-feature-2027-01-01,another-2027-02-02"))
					} else {
						g.Expect(got.header.Get("OpenAI-Beta")).To(Equal("responses_future=v9"))
					}
					wantAnswer := strings.ReplaceAll(recorderAnswer(p.proto, stream), `"model":"up-model"`, `"model":"`+model+`"`)
					g.Expect(string(answer)).To(Equal(wantAnswer), "request %d: the answer came back changed", i)
				}
				rows := usageRows(t, acct, requests)
				for _, r := range rows {
					g.Expect(r.PromptTokens).To(BeEquivalentTo(recorderInput))
					g.Expect(r.CompletionTokens).To(BeEquivalentTo(recorderOutput))
				}
				ledgerUsed(t, acct, requests*textQuota(recorderInput, recorderOutput))
			})
		}
	}
})

// The usage every recorder answer reports.
const recorderInput, recorderOutput = 21, 8

// recorder is an upstream that takes any request of its protocol, records
// it, and answers one fixed answer carrying fields and events no current
// API has.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	body, query string
	header      http.Header
}

func startRecorder(t testing.TB, proto string) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{body: string(body), query: req.URL.RawQuery, header: req.Header.Clone()})
		r.mu.Unlock()
		stream := strings.Contains(string(body), `"stream":true`)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = io.WriteString(w, recorderAnswer(proto, stream))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// recorderAnswer is the recorder's answer in proto, as JSON or as an event
// stream, with unknown fields and (streamed) an unknown event.
func recorderAnswer(proto string, stream bool) string {
	in, out := strconv.Itoa(recorderInput), strconv.Itoa(recorderOutput)
	future := `"x_future_field":{"nested":[1,"two",{"three":null}],"emoji":"\u2603"}`
	switch {
	case proto == "messages" && !stream:
		return `{"id":"msg_rec","type":"message","role":"assistant","model":"up-model","content":[{"type":"text","text":"hi"},{"type":"future_block_2027","payload":{"a":1}}],"stop_reason":"end_turn","stop_sequence":null,` +
			future + `,"usage":{"input_tokens":` + in + `,"output_tokens":` + out + `,"service_tier":"standard"}}`
	case proto == "messages":
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_rec\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"up-model\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":" + in + ",\"output_tokens\":1}," + future + "}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"future_block_2027\",\"payload\":{}}}\n\n" +
			"event: future_event_2027\ndata: {\"type\":\"future_event_2027\",\"index\":0,\"something\":[true]}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"future_delta\",\"bits\":\"abc\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":" + out + "}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	case proto == "chat" && !stream:
		return `{"id":"chatcmpl-rec","object":"chat.completion","created":1,"model":"up-model","choices":[{"index":0,"message":{"role":"assistant","content":"hi","annotations":[],"x_new":1},"finish_reason":"stop"}],` +
			future + `,"usage":{"prompt_tokens":` + in + `,"completion_tokens":` + out + `,"total_tokens":29}}`
	case proto == "chat":
		return "data: {\"id\":\"chatcmpl-rec\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\",\"x_new\":[1]},\"finish_reason\":null}]," + future + "}\n\n" +
			"data: {\"id\":\"chatcmpl-rec\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"chatcmpl-rec\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":" + in + ",\"completion_tokens\":" + out + ",\"total_tokens\":29}}\n\n" +
			"data: [DONE]\n\n"
	case !stream:
		return `{"id":"resp_rec","object":"response","created_at":1,"status":"completed","model":"up-model","output":[{"type":"future_item_2027","id":"fi_1","data":{"k":"v"}},{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}],` +
			future + `,"usage":{"input_tokens":` + in + `,"output_tokens":` + out + `,"total_tokens":29}}`
	}
	resp := func(status, usage string) string {
		return `{"id":"resp_rec","object":"response","created_at":1,"status":"` + status + `","model":"up-model","output":[]` + usage + `}`
	}
	return "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":" + resp("in_progress", "") + "}\n\n" +
		"event: response.future_event_2027\ndata: {\"type\":\"response.future_event_2027\",\"sequence_number\":1," + future + "}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":" +
		resp("completed", `,"usage":{"input_tokens":`+in+`,"output_tokens":`+out+`,"total_tokens":29}`) + "}\n\n"
}

// randomRequest is a request in proto for model with, around the few
// fields every request has, random members, roles, content blocks and tool
// types. Written out by hand so that the bytes, member order included,
// are known.
func randomRequest(rng *rand.Rand, proto, model string, stream bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":%q,`, model)
	if stream {
		b.WriteString(`"stream":true,`)
		if proto == "chat" {
			b.WriteString(`"stream_options":{"include_usage":true},`)
		}
	}
	switch proto {
	case "messages":
		b.WriteString(`"max_tokens":` + strconv.Itoa(1+rng.IntN(4000)) + `,"messages":[`)
		writeMessages(&b, rng, []string{"user", "assistant", "system", "developer", "critic"}, "content")
		b.WriteString(`],"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral","ttl":"1h"}}],`)
	case "chat":
		b.WriteString(`"max_completion_tokens":` + strconv.Itoa(1+rng.IntN(4000)) + `,"messages":[`)
		writeMessages(&b, rng, []string{"user", "assistant", "system", "developer", "tool", "observer"}, "content")
		b.WriteString(`],`)
	default:
		b.WriteString(`"max_output_tokens":` + strconv.Itoa(1+rng.IntN(4000)) + `,"store":false,"input":[`)
		writeMessages(&b, rng, []string{"user", "assistant", "developer", "system", "narrator"}, "content")
		b.WriteString(`],`)
	}
	b.WriteString(`"tools":[`)
	for i := range 1 + rng.IntN(4) {
		if i > 0 {
			b.WriteString(",")
		}
		typ := []string{"", "function", "custom", "namespace", "web_search", "future_tool_2027", "bash_20250124"}[rng.IntN(7)]
		b.WriteString("{")
		if typ != "" {
			fmt.Fprintf(&b, `"type":%q,`, typ)
		}
		fmt.Fprintf(&b, `"name":"tool_%d","description":"d\u00e9j\u00e0 vu","input_schema":{"type":"object","properties":{"x":{"type":"string"}}},%s}`, i, randomMember(rng, 2))
	}
	b.WriteString("]")
	for range rng.IntN(4) {
		b.WriteString("," + randomMember(rng, 3))
	}
	b.WriteString("}")
	return b.String()
}

// writeMessages writes one to four messages with roles from roles and
// content of random blocks.
func writeMessages(b *strings.Builder, rng *rand.Rand, roles []string, content string) {
	for i := range 1 + rng.IntN(4) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, `{"role":%q,%q:`, roles[rng.IntN(len(roles))], content)
		if rng.IntN(3) == 0 {
			b.WriteString(`"plain \"text\" \n with escapes"}`)
			continue
		}
		b.WriteString("[")
		for j := range 1 + rng.IntN(3) {
			if j > 0 {
				b.WriteString(",")
			}
			typ := []string{"text", "input_text", "image", "thinking", "future_block_2027", "document", "tool_result"}[rng.IntN(7)]
			fmt.Fprintf(b, `{"type":%q,"text":"part %d","cache_control":{"type":"ephemeral","ttl":"5m"},%s}`, typ, j, randomMember(rng, 2))
		}
		b.WriteString("]")
		if rng.IntN(2) == 0 {
			b.WriteString("," + randomMember(rng, 2))
		}
		b.WriteString("}")
	}
}

// randomMember is one object member with a random name and a random JSON
// value nested up to depth.
func randomMember(rng *rand.Rand, depth int) string {
	return fmt.Sprintf(`"x_%s_%d":%s`, []string{"future", "beta", "vendor", "opt"}[rng.IntN(4)], rng.IntN(1000), randomValue(rng, depth))
}

func randomValue(rng *rand.Rand, depth int) string {
	kind := rng.IntN(7)
	if depth <= 0 {
		kind = rng.IntN(5)
	}
	switch kind {
	case 0:
		return strconv.Itoa(rng.IntN(1<<20) - 1<<19)
	case 1:
		return strconv.FormatFloat(rng.Float64()*100, 'g', -1, 64)
	case 2:
		return `"s\u00fc\u00df \ud83d\ude00 \\ \/ tab\t"`
	case 3:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	case 4:
		return `""`
	case 5:
		var parts []string
		for range rng.IntN(3) {
			parts = append(parts, randomValue(rng, depth-1))
		}
		return "[" + strings.Join(parts, " , ") + "]"
	}
	var parts []string
	for range rng.IntN(3) {
		parts = append(parts, randomMember(rng, depth-1))
	}
	return "{ " + strings.Join(parts, ",") + " }"
}
