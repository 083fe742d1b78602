package translate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The recorded requests of real coding agents (testdata/agents: the bodies
// Claude Code and Codex CLI sent, one file per request) go through every
// translation the gateway makes of their protocol. A new agent version is
// one more file there: its protocol is read from the body.

const agentsDir = "testdata/agents"

// targetsOf are the protocols a client protocol's requests are translated
// to.
func targetsOf(p Protocol) []Protocol {
	var out []Protocol
	for _, t := range []Protocol{Messages, ChatCompletions, Responses, Gemini, Bedrock} {
		if t != p {
			out = append(out, t)
		}
	}
	return out
}

// bodyProtocol tells a recorded body's protocol: responses has "input";
// chat completions has one of its own members (function tools, tool
// calls, tool messages, ...); the rest is messages.
func bodyProtocol(t *testing.T, body map[string]any) Protocol {
	t.Helper()
	if _, ok := body["input"]; ok {
		return Responses
	}
	if _, ok := body["messages"]; !ok {
		t.Fatalf("neither input nor messages: not a text request")
	}
	for _, k := range []string{"max_completion_tokens", "stream_options", "response_format", "reasoning_effort", "n", "logprobs"} {
		if _, ok := body[k]; ok {
			return ChatCompletions
		}
	}
	for _, tl := range list(body["tools"]) {
		if _, ok := obj(tl)["function"]; ok {
			return ChatCompletions
		}
	}
	for _, m := range list(body["messages"]) {
		mo := obj(m)
		if _, ok := mo["tool_calls"]; ok || mo["role"] == "tool" {
			return ChatCompletions
		}
	}
	return Messages
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }
func str(v any) string         { s, _ := v.(string); return s }

// contentTexts is the text of a content value of any protocol: a string,
// or the text of its text parts.
func contentTexts(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, p := range list(v) {
		if s := str(obj(p)["text"]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// toolRef is a client tool: its namespace and name.
type toolRef struct{ namespace, name string }

// wireFacts is what the checks compare of a request body.
type wireFacts struct {
	tools   []toolRef
	system  []string // system and developer texts, wherever they are
	results []string // tool result call IDs ("" where the protocol has none)
	calls   []string // tool call IDs
	roles   []string // the conversation's roles in order
}

func clientFacts(p Protocol, body map[string]any) wireFacts {
	var f wireFacts
	switch p {
	case Messages:
		for _, tl := range list(body["tools"]) {
			if typ := str(obj(tl)["type"]); typ == "" || typ == "custom" {
				f.tools = append(f.tools, toolRef{"", str(obj(tl)["name"])})
			}
		}
		f.system = contentTexts(body["system"])
		for _, m := range list(body["messages"]) {
			mo := obj(m)
			if r := str(mo["role"]); r == "system" || r == "developer" {
				f.system = append(f.system, contentTexts(mo["content"])...)
				continue
			}
			for _, b := range list(mo["content"]) {
				switch bo := obj(b); str(bo["type"]) {
				case "tool_result":
					f.results = append(f.results, str(bo["tool_use_id"]))
				case "tool_use":
					f.calls = append(f.calls, str(bo["id"]))
				}
			}
		}
	case ChatCompletions:
		for _, tl := range list(body["tools"]) {
			to := obj(tl)
			switch str(to["type"]) {
			case "function":
				f.tools = append(f.tools, toolRef{"", str(obj(to["function"])["name"])})
			case "custom":
				f.tools = append(f.tools, toolRef{"", str(obj(to["custom"])["name"])})
			}
		}
		for _, m := range list(body["messages"]) {
			mo := obj(m)
			switch str(mo["role"]) {
			case "system", "developer":
				f.system = append(f.system, contentTexts(mo["content"])...)
			case "tool":
				f.results = append(f.results, str(mo["tool_call_id"]))
			}
			for _, tc := range list(mo["tool_calls"]) {
				f.calls = append(f.calls, str(obj(tc)["id"]))
			}
		}
	case Responses:
		addTools := func(tools []any) {
			for _, tl := range tools {
				to := obj(tl)
				switch str(to["type"]) {
				case "function", "custom":
					f.tools = append(f.tools, toolRef{"", str(to["name"])})
				case "namespace":
					for _, nt := range list(to["tools"]) {
						if typ := str(obj(nt)["type"]); typ == "function" || typ == "custom" {
							f.tools = append(f.tools, toolRef{str(to["name"]), str(obj(nt)["name"])})
						}
					}
				}
			}
		}
		addTools(list(body["tools"]))
		if s := str(body["instructions"]); s != "" {
			f.system = append(f.system, s)
		}
		for _, it := range list(body["input"]) {
			io := obj(it)
			switch str(io["type"]) {
			case "", "message":
				if r := str(io["role"]); r == "system" || r == "developer" {
					f.system = append(f.system, contentTexts(io["content"])...)
				}
			case "function_call", "custom_tool_call":
				f.calls = append(f.calls, str(io["call_id"]))
			case "function_call_output", "custom_tool_call_output":
				f.results = append(f.results, str(io["call_id"]))
			case "additional_tools":
				addTools(list(io["tools"]))
			}
		}
	}
	return f
}

func targetFacts(p Protocol, body map[string]any) wireFacts {
	var f wireFacts
	switch p {
	case Messages:
		for _, tl := range list(body["tools"]) {
			f.tools = append(f.tools, toolRef{"", str(obj(tl)["name"])})
		}
		f.system = contentTexts(body["system"])
		for _, m := range list(body["messages"]) {
			mo := obj(m)
			f.roles = append(f.roles, str(mo["role"]))
			for _, b := range list(mo["content"]) {
				switch bo := obj(b); str(bo["type"]) {
				case "tool_result":
					f.results = append(f.results, str(bo["tool_use_id"]))
				case "tool_use":
					f.calls = append(f.calls, str(bo["id"]))
				}
			}
		}
	case ChatCompletions:
		for _, tl := range list(body["tools"]) {
			f.tools = append(f.tools, toolRef{"", str(obj(obj(tl)["function"])["name"])})
		}
		for _, m := range list(body["messages"]) {
			mo := obj(m)
			role := str(mo["role"])
			f.roles = append(f.roles, role)
			switch role {
			case "system", "developer":
				f.system = append(f.system, contentTexts(mo["content"])...)
			case "tool":
				f.results = append(f.results, str(mo["tool_call_id"]))
			}
			for _, tc := range list(mo["tool_calls"]) {
				f.calls = append(f.calls, str(obj(tc)["id"]))
			}
		}
	case Responses:
		for _, tl := range list(body["tools"]) {
			f.tools = append(f.tools, toolRef{"", str(obj(tl)["name"])})
		}
		if s := str(body["instructions"]); s != "" {
			f.system = append(f.system, s)
		}
		for _, it := range list(body["input"]) {
			io := obj(it)
			switch str(io["type"]) {
			case "message":
				role := str(io["role"])
				f.roles = append(f.roles, role)
				if role == "system" || role == "developer" {
					f.system = append(f.system, contentTexts(io["content"])...)
				}
			case "function_call":
				f.calls = append(f.calls, str(io["call_id"]))
			case "function_call_output":
				f.results = append(f.results, str(io["call_id"]))
			default:
				f.roles = append(f.roles, "item "+str(io["type"]))
			}
		}
	case Gemini:
		for _, tl := range list(body["tools"]) {
			for _, d := range list(obj(tl)["functionDeclarations"]) {
				f.tools = append(f.tools, toolRef{"", str(obj(d)["name"])})
			}
		}
		f.system = contentTexts(obj(body["systemInstruction"])["parts"])
		for _, c := range list(body["contents"]) {
			co := obj(c)
			f.roles = append(f.roles, str(co["role"]))
			for _, p := range list(co["parts"]) {
				if fr := obj(obj(p)["functionResponse"]); fr != nil {
					f.results = append(f.results, str(fr["name"]))
				}
				if fc := obj(obj(p)["functionCall"]); fc != nil {
					f.calls = append(f.calls, str(fc["name"]))
				}
			}
		}
	case Bedrock:
		for _, tl := range list(obj(body["toolConfig"])["tools"]) {
			f.tools = append(f.tools, toolRef{"", str(obj(obj(tl)["toolSpec"])["name"])})
		}
		f.system = contentTexts(body["system"])
		for _, m := range list(body["messages"]) {
			mo := obj(m)
			f.roles = append(f.roles, str(mo["role"]))
			for _, b := range list(mo["content"]) {
				if tr := obj(obj(b)["toolResult"]); tr != nil {
					f.results = append(f.results, str(tr["toolUseId"]))
				}
				if tu := obj(obj(b)["toolUse"]); tu != nil {
					f.calls = append(f.calls, str(tu["toolUseId"]))
				}
			}
		}
	}
	return f
}

// acceptedRoles are the conversation roles each target takes; the ones
// that want turns to alternate say so.
var acceptedRoles = map[Protocol]struct {
	roles     []string
	alternate bool
}{
	Messages:        {[]string{"user", "assistant"}, true},
	ChatCompletions: {[]string{"system", "developer", "user", "assistant", "tool"}, false},
	Responses:       {[]string{"system", "developer", "user", "assistant"}, false},
	Gemini:          {[]string{"user", "model"}, true},
	Bedrock:         {[]string{"user", "assistant"}, true},
}

// TestAgentRequests translates every recorded agent request to every other
// protocol: the translation succeeds and is JSON; every function-like tool
// arrives (under its own name, or one the ToolMap maps back to it) with a
// name every protocol accepts; every system and developer text arrives
// where the target keeps system text; every tool result arrives in the
// target's result shape, answering a call the target also got; and the
// conversation uses only roles the target takes.
func TestAgentRequests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(agentsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded agent requests in %s (%v)", agentsDir, err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		from := bodyProtocol(t, body)
		want := clientFacts(from, body)
		for _, to := range targetsOf(from) {
			t.Run(fmt.Sprintf("%s/%s_to_%s", filepath.Base(file), from, to), func(t *testing.T) {
				g := NewWithT(t)
				out, tools, err := TranslateRequest(from, to, raw, "upstream-model")
				g.Expect(err).NotTo(HaveOccurred())
				var got map[string]any
				g.Expect(json.Unmarshal(out, &got)).To(Succeed(), "the translation is a JSON object")
				have := targetFacts(to, got)

				var arrived []toolRef
				for _, tr := range have.tools {
					g.Expect(validToolName(tr.name)).To(BeTrue(), "tool name %q is valid everywhere", tr.name)
					if o, ok := tools.origin(tr.name); ok {
						tr = toolRef{o.namespace, o.name}
					}
					arrived = append(arrived, tr)
				}
				g.Expect(arrived).To(ConsistOf(want.tools), "every function-like tool arrives")

				sys := strings.Join(have.system, "\n")
				for _, s := range want.system {
					g.Expect(sys).To(ContainSubstring(strings.TrimSpace(s)), "system text arrives")
				}

				g.Expect(have.results).To(HaveLen(len(want.results)), "every tool result arrives")
				if to == Gemini { // results name the function called
					for _, name := range have.results {
						g.Expect(have.calls).To(ContainElement(name))
					}
				} else {
					g.Expect(have.results).To(ConsistOf(want.results))
					g.Expect(have.calls).To(ConsistOf(want.calls))
					for _, id := range have.results {
						g.Expect(have.calls).To(ContainElement(id), "a result answers a call")
					}
				}

				acc := acceptedRoles[to]
				g.Expect(have.roles).NotTo(BeEmpty())
				for i, r := range have.roles {
					g.Expect(acc.roles).To(ContainElement(r), "role %d", i)
					if acc.alternate && i > 0 {
						g.Expect(r).NotTo(Equal(have.roles[i-1]), "turns alternate (%d)", i)
					}
				}
			})
		}
	}
}

// agentClientRequests are requests of each client protocol declaring the
// tool kinds an agent uses: a plain function; a tool whose name the
// upstream cannot take as it is (for responses, tools in namespaces, one
// of them in an additional_tools item); freeform (custom) tools.
var agentClientRequests = map[Protocol]string{
	Messages: `{"model":"m","max_tokens":1000,"messages":[{"role":"user","content":"go"}],"tools":[
		{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
		{"name":"mcp.server/lookup:v2","input_schema":{"type":"object"}}]}`,
	ChatCompletions: `{"model":"m","messages":[{"role":"user","content":"go"}],"tools":[
		{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
		{"type":"function","function":{"name":"mcp.server/lookup:v2","parameters":{"type":"object"}}},
		{"type":"custom","custom":{"name":"apply_patch","format":{"type":"grammar","grammar":{"syntax":"lark","definition":"start: /.+/"}}}}]}`,
	Responses: `{"model":"m","input":[{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[
			{"type":"custom","name":"exec","format":{"type":"grammar","syntax":"lark","definition":"start: /[\\s\\S]+/"}}]}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}],"tools":[
		{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
		{"type":"namespace","name":"collaboration","description":"sub-agents","tools":[{"type":"function","name":"spawn_agent","parameters":{"type":"object"}}]},
		{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}]}`,
}

// agentCall is a tool call as a client sees it.
type agentCall struct {
	namespace, name string
	custom          bool
	payload         string // the arguments (JSON, compacted) or the freeform input
}

// wantCalls are the calls each client gets back when the upstream calls
// every tool of agentClientRequests.
var wantCalls = map[Protocol][]agentCall{
	Messages: {
		{name: "get_weather", payload: `{"city":"Paris"}`},
		{name: "mcp.server/lookup:v2", payload: `{"q":"x"}`},
	},
	ChatCompletions: {
		{name: "get_weather", payload: `{"city":"Paris"}`},
		{name: "mcp.server/lookup:v2", payload: `{"q":"x"}`},
		{name: "apply_patch", custom: true, payload: "*** Begin Patch\n*** End Patch\n"},
	},
	Responses: {
		{namespace: "functions", name: "exec", custom: true, payload: "text(\"hi\");\n"},
		{name: "get_weather", payload: `{"city":"Paris"}`},
		{namespace: "collaboration", name: "spawn_agent", payload: `{"q":"x"}`},
		{name: "apply_patch", custom: true, payload: "*** Begin Patch\n*** End Patch\n"},
	},
}

// upstreamCalls are the calls of the upstream: each client tool under the
// name the upstream was given, freeform tools with the "input" argument
// they became.
func upstreamCalls(g Gomega, client Protocol, tools *ToolMap) []Part {
	var parts []Part
	for i, c := range wantCalls[client] {
		name := c.name
		found := false
		if tools != nil {
			for up, o := range tools.byUpstream {
				if o.namespace == c.namespace && o.name == c.name {
					name, found = up, true
					g.Expect(o.custom).To(Equal(c.custom))
				}
			}
		}
		if c.namespace != "" || c.custom || !validToolName(c.name) {
			g.Expect(found).To(BeTrue(), "the ToolMap maps %s/%s", c.namespace, c.name)
		}
		args := c.payload
		if c.custom {
			args = string(mustJSON(map[string]string{"input": c.payload}))
		}
		parts = append(parts, Part{Type: PartToolCall, ID: fmt.Sprintf("call_%d", i), Name: name, Arguments: args})
	}
	return parts
}

// upstreamBody is a complete upstream answer of protocol up.
func upstreamBody(g Gomega, up Protocol, r *Response) []byte {
	switch up {
	case Gemini:
		var parts []geminiPart
		for _, p := range r.Parts {
			parts = append(parts, geminiPart{FunctionCall: &geminiFunctionCall{Name: p.Name, Args: json.RawMessage(p.Arguments)}})
		}
		return mustJSON(geminiResponse{Candidates: []geminiCandidate{{Content: &geminiContent{Role: "model", Parts: parts}, FinishReason: "STOP"}},
			UsageMetadata: newGeminiUsage(r.Usage)})
	case Bedrock:
		var blocks []bedrockContentBlock
		for _, p := range r.Parts {
			blocks = append(blocks, bedrockContentBlock{ToolUse: &bedrockToolUse{ToolUseID: p.ID, Name: p.Name, Input: json.RawMessage(p.Arguments)}})
		}
		var br bedrockResponse
		br.Output.Message = &bedrockMessage{Role: "assistant", Content: blocks}
		br.StopReason, br.Usage = "tool_use", newBedrockUsage(r.Usage)
		return mustJSON(br)
	}
	b, err := EncodeResponse(up, r)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}

// upstreamStream is the same answer as the upstream's stream.
func upstreamStream(r *Response, up Protocol) string {
	enc := NewStreamEncoder(up, "upstream-model", true)
	var evs []Event
	for _, se := range ResponseEvents(r) {
		evs = enc.Encode(se, evs)
	}
	var b strings.Builder
	for _, ev := range evs {
		b.Write(ev.AppendSSE(nil))
	}
	return b.String()
}

func compactArgs(s string) string { return compactJSONOr(json.RawMessage(s), s) }

// clientCalls reads the tool calls of a complete answer of protocol p.
func clientCalls(g Gomega, p Protocol, body []byte) []agentCall {
	var v map[string]any
	g.Expect(json.Unmarshal(body, &v)).To(Succeed())
	var out []agentCall
	switch p {
	case Messages:
		for _, b := range list(v["content"]) {
			if bo := obj(b); bo["type"] == "tool_use" {
				out = append(out, agentCall{name: str(bo["name"]), payload: string(mustJSON(bo["input"]))})
			}
		}
	case ChatCompletions:
		for _, tc := range list(obj(obj(list(v["choices"])[0])["message"])["tool_calls"]) {
			out = append(out, chatCall(g, obj(tc)))
		}
	case Responses:
		for _, it := range list(v["output"]) {
			if c, ok := responsesCall(g, obj(it)); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

func chatCall(g Gomega, tc map[string]any) agentCall {
	if tc["type"] == "custom" {
		g.Expect(tc).NotTo(HaveKey("function"))
		return agentCall{name: str(obj(tc["custom"])["name"]), custom: true, payload: str(obj(tc["custom"])["input"])}
	}
	g.Expect(tc["type"]).To(Equal("function"))
	return agentCall{name: str(obj(tc["function"])["name"]), payload: compactArgs(str(obj(tc["function"])["arguments"]))}
}

func responsesCall(g Gomega, it map[string]any) (agentCall, bool) {
	switch it["type"] {
	case "function_call":
		g.Expect(it).To(HaveKey("call_id"))
		return agentCall{namespace: str(it["namespace"]), name: str(it["name"]), payload: compactArgs(str(it["arguments"]))}, true
	case "custom_tool_call":
		g.Expect(it).To(HaveKey("call_id"))
		g.Expect(it).NotTo(HaveKey("arguments"))
		return agentCall{namespace: str(it["namespace"]), name: str(it["name"]), custom: true, payload: str(it["input"])}, true
	}
	return agentCall{}, false
}

// streamCalls reads the tool calls of a client stream of protocol p.
func streamCalls(g Gomega, p Protocol, evs []Event) []agentCall {
	var out []agentCall
	switch p {
	case Messages:
		args := map[float64]*strings.Builder{}
		var order []float64
		for _, e := range evs {
			var v map[string]any
			g.Expect(json.Unmarshal(e.Data, &v)).To(Succeed())
			idx, _ := v["index"].(float64)
			switch e.Name {
			case "content_block_start":
				if cb := obj(v["content_block"]); cb["type"] == "tool_use" {
					out = append(out, agentCall{name: str(cb["name"])})
					args[idx] = &strings.Builder{}
					order = append(order, idx)
				}
			case "content_block_delta":
				if d := obj(v["delta"]); d["type"] == "input_json_delta" {
					args[idx].WriteString(str(d["partial_json"]))
				}
			}
		}
		for i, idx := range order {
			out[i].payload = compactArgs(args[idx].String())
		}
	case ChatCompletions:
		calls := map[float64]*agentCall{}
		var order []float64
		for _, e := range evs {
			if e.IsDone() {
				continue
			}
			var v map[string]any
			g.Expect(json.Unmarshal(e.Data, &v)).To(Succeed())
			for _, ch := range list(v["choices"]) {
				for _, tc := range list(obj(obj(ch)["delta"])["tool_calls"]) {
					tco := obj(tc)
					idx, _ := tco["index"].(float64)
					c := calls[idx]
					if c == nil {
						c = &agentCall{}
						calls[idx] = c
						order = append(order, idx)
					}
					if tco["type"] == "custom" {
						full := chatCall(g, tco)
						*c = full
						continue
					}
					f := obj(tco["function"])
					if n := str(f["name"]); n != "" {
						c.name = n
					}
					c.payload += str(f["arguments"])
				}
			}
		}
		for _, idx := range order {
			c := *calls[idx]
			if !c.custom {
				c.payload = compactArgs(c.payload)
			}
			out = append(out, c)
		}
	case Responses:
		inputDone := map[string]string{}
		for _, e := range evs {
			var v map[string]any
			g.Expect(json.Unmarshal(e.Data, &v)).To(Succeed())
			switch e.Name {
			case "response.custom_tool_call_input.done":
				inputDone[str(v["item_id"])] = str(v["input"])
			case "response.output_item.added":
				if it := obj(v["item"]); it["type"] == "custom_tool_call" {
					g.Expect(it["input"]).To(Equal(""))
				}
			case "response.output_item.done":
				it := obj(v["item"])
				if c, ok := responsesCall(g, it); ok {
					if c.custom {
						g.Expect(inputDone).To(HaveKeyWithValue(str(it["id"]), c.payload), "custom_tool_call_input.done precedes the item")
					}
					out = append(out, c)
				}
			case "response.completed":
				var done []agentCall
				for _, it := range list(obj(v["response"])["output"]) {
					if c, ok := responsesCall(g, obj(it)); ok {
						done = append(done, c)
					}
				}
				g.Expect(done).To(Equal(out), "response.completed holds the same items")
			}
		}
	}
	return out
}

// TestAgentToolCallsComeBack: for each client protocol, an upstream of
// every other protocol calls each kind of client tool (a plain function, a
// renamed or namespaced one, a freeform one), and the client gets them,
// complete and streamed, in its own shape: the original name and
// namespace, function arguments as JSON, a freeform tool's input as its
// text (responses custom_tool_call, chat custom tool call).
func TestAgentToolCallsComeBack(t *testing.T) {
	for _, client := range []Protocol{Messages, ChatCompletions, Responses} {
		for _, up := range targetsOf(client) {
			t.Run(fmt.Sprintf("%s_from_%s", client, up), func(t *testing.T) {
				g := NewWithT(t)
				_, tools, err := TranslateRequest(client, up, []byte(agentClientRequests[client]), "upstream-model")
				g.Expect(err).NotTo(HaveOccurred())
				r := &Response{ID: "up_1", Model: "upstream-model", Stop: StopToolUse, Usage: Usage{InputTokens: 10, OutputTokens: 5},
					Parts: upstreamCalls(g, client, tools)}

				body, _, err := TranslateResponse(up, client, upstreamBody(g, up, r), "client-model", tools)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(clientCalls(g, client, body)).To(Equal(wantCalls[client]), "complete answer")

				evs, tr := collect(t, up, client, upstreamStream(r, up), StreamOptions{Tools: tools})
				g.Expect(tr.Done()).To(BeTrue())
				g.Expect(streamCalls(g, client, evs)).To(Equal(wantCalls[client]), "stream")
			})
		}
	}
	t.Run("no map, no change", func(t *testing.T) {
		g := NewWithT(t)
		_, tools, err := TranslateRequest(Responses, Messages, []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`), "u")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tools).To(BeNil(), "names sent as they were need no map")
	})
}
