package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/anthropic"
)

// TestInvokeGivesToolCallsBackAsTheClientsTools: a responses client (Codex
// in code mode) declares a freeform tool in a namespace; a messages
// upstream gets it as the function functions__exec and calls it; the client
// gets a custom_tool_call of exec in namespace functions, from a complete
// answer, a stream, and a complete answer to a stream request alike.
func TestInvokeGivesToolCallsBackAsTheClientsTools(t *testing.T) {
	const toolUse = `{"type":"tool_use","id":"toolu_1","name":"functions__exec","input":{"input":"text(1);"}}`
	stream := []string{
		sse("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-upstream","usage":{"input_tokens":9,"output_tokens":1}}}`),
		sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"functions__exec","input":{}}}`),
		sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"input\": \"text"}}`),
		sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"(1);\"}"}}`),
		sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
		sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`),
		sse("message_stop", `{"type":"message_stop"}`),
	}
	const complete = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-upstream","content":[` + toolUse + `],
		"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":7}}`
	const body = `{"model":"gpt-client","stream":%s,"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions",
		"tools":[{"type":"custom","name":"exec","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}]}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`
	wantItem := func(g Gomega, item map[string]any) {
		g.Expect(item["type"]).To(Equal("custom_tool_call"))
		g.Expect(item["name"]).To(Equal("exec"))
		g.Expect(item["namespace"]).To(Equal("functions"))
		g.Expect(item["input"]).To(Equal("text(1);"))
		g.Expect(item["call_id"]).To(Equal("toolu_1"))
	}
	for _, c := range []struct {
		name          string
		stream, asSSE bool
	}{{"complete", false, false}, {"stream", true, true}, {"stream answered with JSON", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				if c.asSSE {
					writeSSE(w, stream, 0)
					return
				}
				writeJSON(w, 200, complete)
			})
			res, err := upstream.Invoke(context.Background(), anthropic.New(nil), upstream.Backend{BaseURL: f.URL, UpstreamModel: "claude-upstream"},
				upstream.Request{Protocol: upstream.Responses, Stream: c.stream, Body: []byte(fmt.Sprintf(body, strconv.FormatBool(c.stream)))})
			g.Expect(err).NotTo(HaveOccurred())
			defer res.Close()
			g.Expect(string(f.last().Body)).To(ContainSubstring(`"name":"functions__exec"`))
			if !c.stream {
				var out map[string]any
				g.Expect(json.Unmarshal(res.Body, &out)).To(Succeed())
				g.Expect(out["output"]).To(HaveLen(1))
				wantItem(g, out["output"].([]any)[0].(map[string]any))
				return
			}
			evs, err := drain(t, res.Stream)
			g.Expect(err).NotTo(HaveOccurred())
			var done []map[string]any
			for _, e := range evs {
				if e.Name == "response.output_item.done" {
					var v struct {
						Item map[string]any `json:"item"`
					}
					g.Expect(json.Unmarshal(e.Data, &v)).To(Succeed())
					done = append(done, v.Item)
				}
			}
			g.Expect(done).To(HaveLen(1))
			wantItem(g, done[0])
			g.Expect(names(evs)).To(ContainElement("response.custom_tool_call_input.done"))
		})
	}
}
