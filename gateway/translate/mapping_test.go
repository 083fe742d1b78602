package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// Tests of the mapping rules of docs/protocol-mapping.md that are not a
// single pair's golden output.

// translated translates a request and decodes the result.
func translated(g Gomega, from, to Protocol, body string) map[string]any {
	out, _, err := TranslateRequest(from, to, []byte(body), "up")
	g.Expect(err).NotTo(HaveOccurred(), "%s → %s", from, to)
	var v map[string]any
	g.Expect(json.Unmarshal(out, &v)).To(Succeed())
	return v
}

// at walks a decoded JSON value by member names and array indexes.
func at(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			v = obj(v)[k]
		case int:
			l := list(v)
			if k < 0 {
				k += len(l)
			}
			if k < 0 || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func js(v any) string { return string(mustJSON(v)) }

var clientProtocols = []Protocol{Messages, ChatCompletions, Responses}

// TestRequestsAreReadLeniently: a translation refuses only a body that is
// not the protocol at all; unknown fields, roles, blocks, items and tools
// and values of the wrong type are no reason.
func TestRequestsAreReadLeniently(t *testing.T) {
	odd := map[Protocol]string{
		Messages: `{"model":"m","max_tokens":"lots","temperature":"hot","top_p":7,"brand_new":{"x":1},"stream":"yes",
			"system":[{"type":"text","text":"S"},{"type":"hologram"},5],
			"messages":[{"role":"user","content":[{"type":"video","url":"x"},{"type":"text","text":5},{"type":"text","text":"hi"},"bare"]},
				{"role":"narrator","content":"once upon a time"},{"role":"assistant","content":{"odd":true}},7,
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}],"is_error":"maybe"}]}],
			"tools":[{"name":"f","input_schema":"not a schema"},{"type":"computer_20250124","name":"computer"},{"name":5},{}],
			"tool_choice":{"type":"whatever"},"thinking":{"type":"sometimes","budget_tokens":"many"},"metadata":{"user_id":9}}`,
		ChatCompletions: `{"model":"m","max_tokens":-5,"temperature":9,"n":3,"modalities":["audio"],
			"messages":[{"role":"critic","content":"hm"},{"role":"user","content":[{"type":"input_audio","input_audio":{}},{"type":"text","text":"hi"}]},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"not json"}}]},
				{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r"}]},{"role":"function","name":"f","content":"legacy"},"x"],
			"tools":[{"type":"function","function":{"name":"f"}},{"type":"web_search"},{"type":"function"}],"tool_choice":{"type":"mystery"},
			"response_format":{"type":"json_schema"},"stop":7}`,
		Responses: `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_file","file_id":"f"},{"type":"input_text","text":"hi"}]},
				{"type":"local_shell_call","id":"x"},{"type":"item_reference","id":"r"},{"type":"message","role":"oracle","content":"speak"},
				{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"gAAAAopaque"},{"type":"function_call_output","call_id":"c","output":{"odd":1}},
				{"type":"compaction","encrypted_content":"z"},3],
			"tools":[{"type":"mcp","server_label":"x"},{"type":"image_generation"},{"type":"namespace","name":"n","tools":[{"type":"web_search"},{"type":"function","name":"g"}]}],
			"reasoning":{"effort":"medium","summary":"auto","context":"all_turns"},"text":{"verbosity":"low","format":{"type":"json_schema"}},
			"max_output_tokens":"big","store":false,"include":["reasoning.encrypted_content"],"truncation":"auto","background":true}`,
	}
	for _, from := range clientProtocols {
		for _, to := range targetsOf(from) {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				g := NewWithT(t)
				out, _, err := TranslateRequest(from, to, []byte(odd[from]), "up")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(json.Valid(out)).To(BeTrue())
			})
		}
		t.Run(string(from)+" refusals", func(t *testing.T) {
			g := NewWithT(t)
			bad := []string{`[1]`, `"x"`, `{"model":"m","messages":{"role":"user"}}`, `{"model":"m","messages":"hi"}`}
			if from == Responses {
				bad = []string{`[1]`, `7`, `{"model":"m","input":{"role":"user"}}`, `{"model":"m","input":5}`}
			}
			for _, b := range bad {
				_, _, err := TranslateRequest(from, targetsOf(from)[0], []byte(b), "up")
				g.Expect(err).To(HaveOccurred(), "%s", b)
			}
		})
	}
	g := NewWithT(t)
	// A value of the wrong type reads as absent, not as zero.
	r, err := DecodeRequest(Messages, []byte(`{"model":"m","max_tokens":5,"temperature":"hot","top_p":0.5,"messages":[]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Temperature).To(BeNil())
	g.Expect(*r.TopP).To(Equal(0.5))
	// Out-of-range numbers are clamped to each target's range.
	v := translated(g, ChatCompletions, Messages, `{"model":"m","temperature":1.7,"top_p":3,"messages":[{"role":"user","content":"hi"}]}`)
	g.Expect(v["temperature"]).To(Equal(1.0))
	g.Expect(v["top_p"]).To(Equal(1.0))
	v = translated(g, Messages, ChatCompletions, `{"model":"m","max_tokens":9,"temperature":-2,"messages":[{"role":"user","content":"hi"}]}`)
	g.Expect(v["temperature"]).To(Equal(0.0))
}

// TestMidConversationSystem: a system or developer message after the
// conversation began stays where it is on chat (system) and responses
// (developer); targets with one top-level system prompt get it appended
// to that prompt, after the leading ones, in order.
func TestMidConversationSystem(t *testing.T) {
	const claudeLike = `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"S0"}],"messages":[
		{"role":"user","content":"U1"},
		{"role":"system","content":[{"type":"text","text":"S1","cache_control":{"type":"ephemeral"}}],"output_config":{"effort":"medium"}},
		{"role":"assistant","content":"A1"},
		{"role":"developer","content":"S2"},
		{"role":"user","content":"U2"}]}`
	g := NewWithT(t)
	v := translated(g, Messages, ChatCompletions, claudeLike)
	g.Expect(js(v["messages"])).To(MatchJSON(`[{"role":"system","content":"S0"},{"role":"user","content":"U1"},{"role":"system","content":"S1"},
		{"role":"assistant","content":"A1"},{"role":"system","content":"S2"},{"role":"user","content":"U2"}]`))
	v = translated(g, Messages, Responses, claudeLike)
	g.Expect(v["instructions"]).To(Equal("S0"))
	g.Expect(js(v["input"])).To(MatchJSON(`[{"type":"message","role":"user","content":[{"type":"input_text","text":"U1"}]},
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"S1"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A1","annotations":[]}]},
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"S2"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"U2"}]}]`))
	v = translated(g, Messages, Gemini, claudeLike)
	g.Expect(js(v["systemInstruction"])).To(MatchJSON(`{"parts":[{"text":"S0"},{"text":"S1"},{"text":"S2"}]}`))
	g.Expect(at(v, "contents", 1, "role")).To(Equal("model"))
	v = translated(g, Messages, Bedrock, claudeLike)
	g.Expect(js(v["system"])).To(MatchJSON(`[{"text":"S0"},{"text":"S1"},{"text":"S2"}]`))

	// Chat and responses system/developer messages: the same rule.
	const chatLike = `{"model":"m","messages":[{"role":"developer","content":"D0"},{"role":"user","content":"U1"},{"role":"system","content":"S1"},{"role":"user","content":"U2"}]}`
	v = translated(g, ChatCompletions, Messages, chatLike)
	g.Expect(v["system"]).To(Equal("D0\n\nS1"))
	g.Expect(js(v["messages"])).To(MatchJSON(`[{"role":"user","content":[{"type":"text","text":"U1"},{"type":"text","text":"U2"}]}]`))
	v = translated(g, ChatCompletions, Responses, chatLike)
	g.Expect(v["instructions"]).To(Equal("D0"))
	g.Expect(at(v, "input", 1, "role")).To(Equal("developer"))
	const responsesLike = `{"model":"m","instructions":"I","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"D0"}]},
		{"type":"message","role":"user","content":"U1"},{"type":"message","role":"developer","content":"D1"},{"type":"message","role":"user","content":"U2"}]}`
	v = translated(g, Responses, Messages, responsesLike)
	g.Expect(v["system"]).To(Equal("I\n\nD0\n\nD1"))
	v = translated(g, Responses, ChatCompletions, responsesLike)
	g.Expect(js(v["messages"])).To(MatchJSON(`[{"role":"system","content":"I"},{"role":"system","content":"D0"},{"role":"user","content":"U1"},
		{"role":"system","content":"D1"},{"role":"user","content":"U2"}]`))
}

// TestUnknownBlocks: one rule in every direction for content the neutral
// form has no kind for: a block that carries text (its text, a text
// document's source data, the text blocks of its content) becomes a text
// part; any other is dropped.
func TestUnknownBlocks(t *testing.T) {
	bodies := map[Protocol]string{
		Messages: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
			{"type":"text","text":"A"},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"DOC"},"title":"t"},
			{"type":"document","source":{"type":"content","content":[{"type":"text","text":"DOC2"}]}},
			{"type":"search_result","source":"https://x","title":"t","content":[{"type":"text","text":"SR"}]},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBER"}},
			{"type":"video","source":{"type":"url","url":"https://x/v.mp4"}},
			{"type":"foo","text":"FOO"}]}]}`,
		ChatCompletions: `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"A"},{"type":"file","file":{"file_id":"f"}},{"type":"input_audio","input_audio":{"data":"x","format":"wav"}},
			{"type":"foo","text":"FOO"},{"type":"video"}]}]}`,
		Responses: `{"model":"m","input":[{"type":"message","role":"user","content":[
			{"type":"input_text","text":"A"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBER"},{"type":"input_audio"},
			{"type":"foo","text":"FOO"},{"type":"video"}]}]}`,
	}
	want := map[Protocol][]string{
		Messages:        {"A", "DOC", "DOC2", "SR", "FOO"},
		ChatCompletions: {"A", "FOO"},
		Responses:       {"A", "FOO"},
	}
	for _, from := range clientProtocols {
		for _, to := range targetsOf(from) {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				g := NewWithT(t)
				v := translated(g, from, to, bodies[from])
				var texts []string
				switch to {
				case Messages:
					for _, b := range list(at(v, "messages", 0, "content")) {
						g.Expect(at(b, "type")).To(Equal("text"))
						texts = append(texts, str(at(b, "text")))
					}
				case ChatCompletions:
					c := at(v, "messages", 0, "content")
					if s, ok := c.(string); ok {
						texts = append(texts, s)
					}
					for _, p := range list(c) {
						g.Expect(at(p, "type")).To(Equal("text"))
						texts = append(texts, str(at(p, "text")))
					}
				case Responses:
					for _, p := range list(at(v, "input", 0, "content")) {
						g.Expect(at(p, "type")).To(Equal("input_text"))
						texts = append(texts, str(at(p, "text")))
					}
				case Gemini:
					for _, p := range list(at(v, "contents", 0, "parts")) {
						texts = append(texts, str(at(p, "text")))
					}
				case Bedrock:
					for _, b := range list(at(v, "messages", 0, "content")) {
						texts = append(texts, str(at(b, "text")))
					}
				}
				g.Expect(texts).To(Equal(want[from]))
			})
		}
	}
	g := NewWithT(t)
	// Tool results by the same rule: text blocks and text-bearing blocks.
	r, err := DecodeRequest(Messages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
		"content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}},{"type":"search_result","content":[{"type":"text","text":"b"}]}]}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Messages[0].Parts[0].Text).To(Equal("ab"))
}

// TestToolChoiceAndParallelCalls maps every form of tool choice and the
// parallel tool call switch across the pairs.
func TestToolChoiceAndParallelCalls(t *testing.T) {
	const (
		mTools = `"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"g","input_schema":{"type":"object"}}]`
		cTools = `"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}]`
		rTools = `"tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}]`
	)
	body := func(from Protocol, choice string, parallel string) string {
		switch from {
		case Messages:
			return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],` + mTools + choice + `}`
		case ChatCompletions:
			return `{"model":"m","messages":[{"role":"user","content":"hi"}],` + cTools + choice + parallel + `}`
		}
		return `{"model":"m","input":"hi",` + rTools + choice + parallel + `}`
	}
	// choice per client protocol → what each target gets (JSON of its
	// choice member and of its parallel switch, "" when absent).
	type expect struct{ messages, chat, responses, gemini, bedrock string }
	cases := []struct {
		name    string
		choices map[Protocol]string
		want    expect
	}{
		{"auto", map[Protocol]string{Messages: `,"tool_choice":{"type":"auto"}`, ChatCompletions: `,"tool_choice":"auto"`, Responses: `,"tool_choice":"auto"`},
			expect{`{"type":"auto"}`, `"auto"`, `"auto"`, `{"functionCallingConfig":{"mode":"AUTO"}}`, `{"auto":{}}`}},
		{"none", map[Protocol]string{Messages: `,"tool_choice":{"type":"none"}`, ChatCompletions: `,"tool_choice":"none"`, Responses: `,"tool_choice":"none"`},
			expect{`{"type":"none"}`, `"none"`, `"none"`, `{"functionCallingConfig":{"mode":"NONE"}}`, ``}},
		{"required", map[Protocol]string{Messages: `,"tool_choice":{"type":"any"}`, ChatCompletions: `,"tool_choice":"required"`, Responses: `,"tool_choice":"required"`},
			expect{`{"type":"any"}`, `"required"`, `"required"`, `{"functionCallingConfig":{"mode":"ANY"}}`, `{"any":{}}`}},
		{"named", map[Protocol]string{Messages: `,"tool_choice":{"type":"tool","name":"g"}`, ChatCompletions: `,"tool_choice":{"type":"function","function":{"name":"g"}}`,
			Responses: `,"tool_choice":{"type":"function","name":"g"}`},
			expect{`{"type":"tool","name":"g"}`, `{"type":"function","function":{"name":"g"}}`, `{"type":"function","name":"g"}`,
				`{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["g"]}}`, `{"tool":{"name":"g"}}`}},
	}
	targetChoice := func(to Protocol, v map[string]any) string {
		var c any
		switch to {
		case Messages:
			c = v["tool_choice"]
		case ChatCompletions, Responses:
			c = v["tool_choice"]
		case Gemini:
			c = v["toolConfig"]
		case Bedrock:
			c = at(v, "toolConfig", "toolChoice")
		}
		if c == nil {
			return ""
		}
		return js(c)
	}
	for _, c := range cases {
		for _, from := range clientProtocols {
			for _, to := range targetsOf(from) {
				t.Run(fmt.Sprintf("%s/%s_to_%s", c.name, from, to), func(t *testing.T) {
					g := NewWithT(t)
					v := translated(g, from, to, body(from, c.choices[from], ""))
					want := map[Protocol]string{Messages: c.want.messages, ChatCompletions: c.want.chat, Responses: c.want.responses,
						Gemini: c.want.gemini, Bedrock: c.want.bedrock}[to]
					if want == "" {
						g.Expect(targetChoice(to, v)).To(BeEmpty())
					} else {
						g.Expect(targetChoice(to, v)).To(MatchJSON(want))
					}
				})
			}
		}
	}
	g := NewWithT(t)
	// allowed_tools narrows the tool list and keeps the mode.
	for _, from := range []Protocol{ChatCompletions, Responses} {
		choice := `,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"}]}`
		if from == ChatCompletions {
			choice = `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"g"}}]}}`
		}
		v := translated(g, from, Messages, body(from, choice, ""))
		g.Expect(js(v["tool_choice"])).To(MatchJSON(`{"type":"any"}`))
		g.Expect(v["tools"]).To(HaveLen(1))
		g.Expect(at(v, "tools", 0, "name")).To(Equal("g"))
		v = translated(g, from, Gemini, body(from, choice, ""))
		g.Expect(at(v, "tools", 0, "functionDeclarations")).To(HaveLen(1))
	}
	// A hosted tool's choice has no equivalent: the default.
	v := translated(g, Responses, Messages, body(Responses, `,"tool_choice":{"type":"web_search_preview"}`, ""))
	g.Expect(v).NotTo(HaveKey("tool_choice"))

	// parallel_tool_calls ⇄ disable_parallel_tool_use.
	for _, from := range []Protocol{ChatCompletions, Responses} {
		v := translated(g, from, Messages, body(from, "", `,"parallel_tool_calls":false`))
		g.Expect(js(v["tool_choice"])).To(MatchJSON(`{"type":"auto","disable_parallel_tool_use":true}`))
		v = translated(g, from, Messages, body(from, `,"tool_choice":"required"`, `,"parallel_tool_calls":false`))
		g.Expect(js(v["tool_choice"])).To(MatchJSON(`{"type":"any","disable_parallel_tool_use":true}`))
		v = translated(g, from, Messages, body(from, "", `,"parallel_tool_calls":true`))
		g.Expect(v).NotTo(HaveKey("tool_choice"))
	}
	v = translated(g, Messages, ChatCompletions, body(Messages, `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`, ""))
	g.Expect(v["parallel_tool_calls"]).To(BeFalse())
	v = translated(g, Messages, Responses, body(Messages, `,"tool_choice":{"type":"any","disable_parallel_tool_use":true}`, ""))
	g.Expect(v["parallel_tool_calls"]).To(BeFalse())
	g.Expect(v["tool_choice"]).To(Equal("required"))
	v = translated(g, Responses, ChatCompletions, body(Responses, "", `,"parallel_tool_calls":true`))
	g.Expect(v["parallel_tool_calls"]).To(BeTrue())
	// Without tools there is nothing to choose, and OpenAI refuses the switch.
	v = translated(g, Responses, ChatCompletions, `{"model":"m","input":"hi","parallel_tool_calls":false,"tool_choice":"auto"}`)
	g.Expect(v).NotTo(HaveKey("parallel_tool_calls"))
	g.Expect(v).NotTo(HaveKey("tool_choice"))
}

// TestReasoningMapping: thinking, effort and budgets across the pairs.
func TestReasoningMapping(t *testing.T) {
	g := NewWithT(t)
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		thinking, effort string
	}{
		{`"thinking":{"type":"adaptive","display":"omitted"}`, "medium"},
		{`"thinking":{"type":"adaptive"},"output_config":{"effort":"high"}`, "high"},
		{`"thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"}`, "high"},
		{`"thinking":{"type":"enabled","budget_tokens":1500}`, "low"},
		{`"output_config":{"effort":"low"}`, "low"},
		{`"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}`, "high"},
		{`"thinking":{"type":"disabled"}`, ""},
	} {
		body := `{"model":"m","max_tokens":64000,` + user + `,` + c.thinking + `}`
		v := translated(g, Messages, Responses, body)
		g.Expect(str(at(v, "reasoning", "effort"))).To(Equal(c.effort), "%s to responses", c.thinking)
		v = translated(g, Messages, ChatCompletions, body)
		g.Expect(str(v["reasoning_effort"])).To(Equal(c.effort), "%s to chat", c.thinking)
	}
	// Gemini: the budget, at most what every 2.5 model takes; thoughts
	// shown unless the client asked them omitted or enabled no thinking.
	v := translated(g, Messages, Gemini, `{"model":"m","max_tokens":64000,`+user+`,"thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"}}`)
	g.Expect(js(at(v, "generationConfig", "thinkingConfig"))).To(MatchJSON(`{"thinkingBudget":24576}`))
	v = translated(g, Messages, Gemini, `{"model":"m","max_tokens":64000,`+user+`,"thinking":{"type":"adaptive"}}`)
	g.Expect(js(at(v, "generationConfig", "thinkingConfig"))).To(MatchJSON(`{"includeThoughts":true,"thinkingBudget":4096}`))
	v = translated(g, Responses, Gemini, `{"model":"m","input":"hi","reasoning":{"effort":"low","summary":"auto"}}`)
	g.Expect(js(at(v, "generationConfig", "thinkingConfig"))).To(MatchJSON(`{"includeThoughts":true,"thinkingBudget":1024}`))
	// OpenAI effort → thinking budget, max_tokens making room for it when
	// the client set none.
	v = translated(g, Responses, Messages, `{"model":"m","input":"hi","reasoning":{"effort":"medium"}}`)
	g.Expect(js(v["thinking"])).To(MatchJSON(`{"type":"enabled","budget_tokens":4096}`))
	g.Expect(v["max_tokens"]).To(BeEquivalentTo(DefaultMaxTokens + 4096))
	v = translated(g, ChatCompletions, Messages, `{"model":"m","reasoning_effort":"high","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	g.Expect(v).NotTo(HaveKey("thinking"), "a budget that does not fit max_tokens")
	// A configuration_update item's effort replaces the request's.
	v = translated(g, Responses, ChatCompletions, `{"model":"m","reasoning":{"effort":"high"},"input":[{"type":"message","role":"user","content":"hi"},{"type":"configuration_update","reasoning":{"effort":"low"}}]}`)
	g.Expect(v["reasoning_effort"]).To(Equal("low"))
	// A forced tool choice and thinking do not go together upstream.
	v = translated(g, Responses, Messages, `{"model":"m","input":"hi","reasoning":{"effort":"low"},"tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`)
	g.Expect(v).NotTo(HaveKey("thinking"))
}

// TestReasoningCarriedBack: a responses client keeps a messages upstream's
// thinking (text and signature, or redacted data) in a reasoning item's
// encrypted_content, and its next turn gives the upstream the thinking
// block back; reasoning items of OpenAI's own are dropped toward it.
func TestReasoningCarriedBack(t *testing.T) {
	g := NewWithT(t)
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[
		{"type":"thinking","thinking":"Let me think.","signature":"SIG+/="},{"type":"redacted_thinking","data":"REDACTED"},
		{"type":"tool_use","id":"toolu_1","name":"exec_command","input":{"cmd":"ls"}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`
	body, _, err := TranslateResponse(Messages, Responses, []byte(answer), "client-model", nil)
	g.Expect(err).NotTo(HaveOccurred())
	var resp map[string]any
	g.Expect(json.Unmarshal(body, &resp)).To(Succeed())
	out := list(resp["output"])
	g.Expect(out).To(HaveLen(3))
	g.Expect(at(out, 0, "type")).To(Equal("reasoning"))
	g.Expect(str(at(out, 0, "encrypted_content"))).To(HavePrefix(reasoningPrefix))
	g.Expect(at(out, 0, "summary", 0, "text")).To(Equal("Let me think."))
	g.Expect(str(at(out, 1, "encrypted_content"))).To(HavePrefix(reasoningPrefix))

	// The stream carries the same items.
	sse := upstreamStream(mustDecode(g, Messages, answer), Messages)
	evs, _ := collect(t, Messages, Responses, sse, StreamOptions{})
	var streamed []any
	for _, e := range evs {
		if e.Name == "response.output_item.done" {
			var v map[string]any
			g.Expect(json.Unmarshal(e.Data, &v)).To(Succeed())
			streamed = append(streamed, v["item"])
		}
	}
	g.Expect(streamed).To(HaveLen(3))
	g.Expect(at(streamed, 0, "encrypted_content")).To(Equal(at(out, 0, "encrypted_content")))
	g.Expect(at(streamed, 1, "encrypted_content")).To(Equal(at(out, 1, "encrypted_content")))

	// The next turn, as Codex sends it: the items replayed, the result.
	next := map[string]any{"model": "m", "reasoning": map[string]any{"effort": "low"}, "input": append(append([]any{
		map[string]any{"type": "message", "role": "user", "content": "go"}}, out...),
		map[string]any{"type": "function_call_output", "call_id": "toolu_1", "output": "a b"})}
	v := translated(g, Responses, Messages, js(next))
	g.Expect(js(at(v, "messages", 1, "content"))).To(MatchJSON(`[{"type":"thinking","thinking":"Let me think.","signature":"SIG+/="},
		{"type":"redacted_thinking","data":"REDACTED"},{"type":"tool_use","id":"toolu_1","name":"exec_command","input":{"cmd":"ls"}}]`))
	g.Expect(js(v["thinking"])).To(MatchJSON(`{"type":"enabled","budget_tokens":1024}`), "the tool loop carries its thinking: thinking stays on")

	// Without the items, the tool loop has no thinking to continue: the
	// API would refuse thinking, so it is not asked for.
	noReasoning := js(map[string]any{"model": "m", "reasoning": map[string]any{"effort": "low"}, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": "go"}, out[2],
		map[string]any{"type": "function_call_output", "call_id": "toolu_1", "output": "a b"}}})
	v = translated(g, Responses, Messages, noReasoning)
	g.Expect(v).NotTo(HaveKey("thinking"))

	// OpenAI's own encrypted reasoning means nothing to other vendors.
	openai := `{"model":"m","input":[{"type":"message","role":"user","content":"go"},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"gAAAAABopaque"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r"}]}`
	for _, to := range []Protocol{Messages, ChatCompletions, Gemini, Bedrock} {
		out, _, err := TranslateRequest(Responses, to, []byte(openai), "up")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(out)).NotTo(ContainSubstring("gAAAA"), to)
		g.Expect(string(out)).NotTo(ContainSubstring(`"thinking"`), to)
	}
	// Thinking another vendor signed is not replayed to messages.
	p := Part{Type: PartThinking, Text: "t", Signature: "s"}
	blob := encodeReasoning(p, Bedrock)
	v = translated(g, Responses, Messages, `{"model":"m","input":[{"type":"message","role":"user","content":"go"},{"type":"reasoning","summary":[],"encrypted_content":"`+blob+`"},{"type":"message","role":"assistant","content":"ok"}]}`)
	g.Expect(js(at(v, "messages", 1, "content"))).To(MatchJSON(`[{"type":"text","text":"ok"}]`))
}

func mustDecode(g Gomega, p Protocol, body string) *Response {
	r, err := DecodeResponse(p, []byte(body))
	g.Expect(err).NotTo(HaveOccurred())
	return r
}

// TestOutputFormat: structured output across the pairs.
func TestOutputFormat(t *testing.T) {
	g := NewWithT(t)
	const schema = `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}`
	title := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"name it"}],"output_config":{"effort":"medium","format":{"type":"json_schema","schema":` + schema + `}}}`
	v := translated(g, Messages, ChatCompletions, title)
	g.Expect(js(v["response_format"])).To(MatchJSON(`{"type":"json_schema","json_schema":{"name":"output","schema":` + schema + `}}`))
	v = translated(g, Messages, Responses, title)
	g.Expect(js(at(v, "text"))).To(MatchJSON(`{"format":{"type":"json_schema","name":"output","schema":` + schema + `}}`))
	v = translated(g, Messages, Gemini, title)
	g.Expect(at(v, "generationConfig", "responseMimeType")).To(Equal("application/json"))
	g.Expect(js(at(v, "generationConfig", "responseJsonSchema"))).To(MatchJSON(schema))
	v = translated(g, Messages, Bedrock, title)
	g.Expect(js(v)).NotTo(ContainSubstring("title\":{"), "Converse has no structured output")

	v = translated(g, ChatCompletions, Messages, `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"t","strict":true,"schema":`+schema+`}}}`)
	g.Expect(js(v["output_config"])).To(MatchJSON(`{"format":{"type":"json_schema","schema":` + schema + `}}`))
	v = translated(g, Responses, ChatCompletions, `{"model":"m","input":"x","text":{"verbosity":"low","format":{"type":"json_schema","name":"t","strict":true,"schema":`+schema+`}}}`)
	g.Expect(js(v["response_format"])).To(MatchJSON(`{"type":"json_schema","json_schema":{"name":"t","strict":true,"schema":` + schema + `}}`))
	v = translated(g, ChatCompletions, Messages, `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`)
	g.Expect(v).NotTo(HaveKey("output_config"), "messages has no JSON mode without a schema")
	v = translated(g, ChatCompletions, Gemini, `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`)
	g.Expect(js(v["generationConfig"])).To(MatchJSON(`{"responseMimeType":"application/json"}`))
}

// TestToolNames: namespaced and freeform tools, and names no protocol
// takes, reach the upstream as valid function names that map back.
func TestToolNames(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("x", 70)
	body := `{"model":"m","input":[{"type":"function_call","call_id":"c0","namespace":"collaboration","name":"spawn_agent","arguments":"{}"},
		{"type":"function_call_output","call_id":"c0","output":"ok"},
		{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch"},
		{"type":"custom_tool_call_output","call_id":"c1","output":[{"type":"input_text","text":"Done"},{"type":"input_text","text":"!"}]}],
		"tools":[{"type":"function","name":"collaboration__spawn_agent","parameters":{"type":"object"}},
		{"type":"namespace","name":"collaboration","description":"Sub-agents.","tools":[{"type":"function","name":"spawn_agent","description":"Spawn.","parameters":{"type":"object"}}]},
		{"type":"custom","name":"apply_patch","description":"Patch.","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}},
		{"type":"function","name":"` + long + `"},{"type":"function","name":"a.b"},{"type":"web_search"},{"type":"tool_search","execution":"client","parameters":{}}]}`
	out, tools, err := TranslateRequest(Responses, Messages, []byte(body), "up")
	g.Expect(err).NotTo(HaveOccurred())
	var v map[string]any
	g.Expect(json.Unmarshal(out, &v)).To(Succeed())
	var names []string
	for _, tl := range list(v["tools"]) {
		n := str(at(tl, "name"))
		g.Expect(validToolName(n)).To(BeTrue(), n)
		names = append(names, n)
	}
	g.Expect(names).To(HaveLen(5), "web_search and tool_search dropped")
	// The client's own tool keeps its name; the namespaced one of the
	// same joined name gets a hashed one.
	g.Expect(names[0]).To(Equal("collaboration__spawn_agent"))
	g.Expect(names[1]).To(MatchRegexp(`^collaboration__spawn_agent_[0-9a-f]{8}$`))
	g.Expect(names[2]).To(Equal("apply_patch"))
	g.Expect(names[3]).To(MatchRegexp(`^x{55}_[0-9a-f]{8}$`))
	g.Expect(names[4]).To(MatchRegexp(`^a_b_[0-9a-f]{8}$`))
	for i, want := range []toolOrigin{{namespace: "collaboration", name: "spawn_agent"}, {name: "apply_patch", custom: true}, {name: long}, {name: "a.b"}} {
		o, ok := tools.origin(names[i+1])
		g.Expect(ok).To(BeTrue())
		g.Expect(o).To(Equal(want))
	}
	_, ok := tools.origin(names[0])
	g.Expect(ok).To(BeFalse(), "a name sent as it was is not in the map")
	g.Expect(at(v, "tools", 1, "description")).To(Equal("Spawn.\n\n(collaboration: Sub-agents.)"))
	g.Expect(js(at(v, "tools", 2, "input_schema"))).To(MatchJSON(`{"type":"object","properties":{"input":{"type":"string",
		"description":"The tool's input, as free text that matches this lark grammar:\nstart: /.+/"}},"required":["input"]}`))
	// The history calls the same names; a freeform call's input is the
	// "input" argument; its output array is text.
	g.Expect(js(at(v, "messages", 0, "content"))).To(MatchJSON(`[{"type":"tool_use","id":"c0","name":"` + names[1] + `","input":{}}]`))
	g.Expect(js(at(v, "messages", 2, "content"))).To(MatchJSON(`[{"type":"tool_use","id":"c1","name":"apply_patch","input":{"input":"*** Begin Patch"}}]`))
	g.Expect(js(at(v, "messages", 3, "content"))).To(MatchJSON(`[{"type":"tool_result","tool_use_id":"c1","content":"Done!"}]`))

	// A chosen tool is named by its upstream name.
	v = translated(g, Responses, ChatCompletions, `{"model":"m","input":"x","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","name":"f"}}`)
	g.Expect(js(v["tool_choice"])).To(MatchJSON(`{"type":"function","function":{"name":"ns__f"}}`))

	// A grammar longer than the bound is cut at a character boundary.
	d := customFormatText(json.RawMessage(`{"type":"grammar","syntax":"lark","definition":"` + strings.Repeat("é", maxFormatText) + `"}`))
	g.Expect(d).To(HaveSuffix("\n… (grammar cut)"))
	g.Expect(len(d)).To(BeNumerically("<", maxFormatText+200))
	g.Expect(customInput(`{"input":"x"}`)).To(Equal("x"))
	g.Expect(customInput(`"y"`)).To(Equal("y"))
	g.Expect(customInput(`not json`)).To(Equal("not json"))
}

// TestDroppedFields: what has no equivalent does not reach the target.
func TestDroppedFields(t *testing.T) {
	g := NewWithT(t)
	claude := `{"model":"m","max_tokens":100,"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
		"metadata":{"user_id":"{\"device_id\":\"d\"}"},"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral","ttl":"1h"}}],
		"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],
		"tools":[{"name":"DeferredToolPlaceholder","description":"d","input_schema":{"type":"object"},"defer_loading":true},{"type":"web_search_20250305","name":"web_search"}]}`
	for _, to := range targetsOf(Messages) {
		out, _, err := TranslateRequest(Messages, to, []byte(claude), "up")
		g.Expect(err).NotTo(HaveOccurred())
		for _, k := range []string{"context_management", "cache_control", "defer_loading", "web_search", "clear_thinking"} {
			g.Expect(string(out)).NotTo(ContainSubstring(k), "%s to %s", k, to)
		}
		g.Expect(string(out)).To(ContainSubstring("DeferredToolPlaceholder"), "the tool stays, without defer_loading")
	}
	codex := `{"model":"m","input":"hi","store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{"turn_id":"t"},
		"text":{"verbosity":"low"},"previous_response_id":"resp_1","truncation":"auto","service_tier":"flex","tools":[{"type":"web_search","external_web_access":true}]}`
	for _, to := range targetsOf(Responses) {
		out, _, err := TranslateRequest(Responses, to, []byte(codex), "up")
		g.Expect(err).NotTo(HaveOccurred())
		for _, k := range []string{"store", "include", "prompt_cache_key", "client_metadata", "verbosity", "previous_response_id", "truncation", "service_tier", "web_search"} {
			g.Expect(string(out)).NotTo(ContainSubstring(`"`+k+`"`), "%s to %s", k, to)
		}
	}
	// Gemini refuses a schema's "$schema" member.
	v := translated(g, Messages, Gemini, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}}]}`)
	g.Expect(js(at(v, "tools", 0, "functionDeclarations", 0, "parametersJsonSchema"))).To(MatchJSON(`{"type":"object"}`))
}
