package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The real coding agents, run as their users run them, through the
// gateway: Claude Code (Anthropic's Messages API) and the Codex CLI
// (OpenAI's Responses API), each against an upstream of its own protocol
// and against upstreams of the others, which the gateway translates to.
// The upstream (a faithful fake of each vendor's API) asks for the agent's
// shell tool on the first turn; the agent runs it and sends the result
// back; the upstream answers with text naming what the tool printed. Every
// upstream call is one usage row, billed exactly.
var _ = Describe("Coding agents", Label("agents"), func() {
	for _, up := range []string{"anthropic", "openai-chat", "openai-responses", "gemini", "bedrock"} {
		It("Claude Code through "+up, func() {
			t := GinkgoTB()
			a := requireAgents(t)
			runAgentRoundTrip(t, up, "claude-opus-5-5", func(ctx context.Context, base, key, home, dir string) *exec.Cmd {
				cmd := exec.CommandContext(ctx, a.claude, "-p", "Run the shell command: echo "+toolWord,
					"--dangerously-skip-permissions", "--output-format", "json")
				cmd.Env = append(agentEnv(home),
					"IS_SANDBOX=1", // it runs as root here, and refuses to skip permissions as root without it
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
					"CLAUDE_CODE_MAX_RETRIES=0",
					"ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY="+key, "ANTHROPIC_MODEL=claude-opus-5-5")
				return cmd
			}, func(g Gomega, stdout []byte) {
				var out struct {
					IsError bool   `json:"is_error"`
					Result  string `json:"result"`
				}
				g.Expect(json.Unmarshal(lastLine(stdout), &out)).To(Succeed(), "%s", stdout)
				g.Expect(out.IsError).To(BeFalse(), "%s", stdout)
				g.Expect(out.Result).To(Equal("done: "+toolWord), "%s", stdout)
			})
		})
	}
	for _, up := range []string{"openai-responses", "anthropic", "openai-chat", "gemini"} {
		It("Codex through "+up, func() {
			t := GinkgoTB()
			a := requireAgents(t)
			runAgentRoundTrip(t, up, "gpt-5.5", func(ctx context.Context, base, key, home, dir string) *exec.Cmd {
				codexHome := filepath.Join(home, ".codex")
				NewWithT(t).Expect(os.MkdirAll(codexHome, 0o700)).To(Succeed())
				NewWithT(t).Expect(os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(base, "gpt-5.5")), 0o600)).To(Succeed())
				cmd := exec.CommandContext(ctx, a.codex, "exec", "--skip-git-repo-check",
					"--dangerously-bypass-approvals-and-sandbox", "Run the shell command: echo "+toolWord)
				cmd.Env = append(agentEnv(home), "CODEX_HOME="+codexHome, "MODELGATE_API_KEY="+key)
				return cmd
			}, func(g Gomega, stdout []byte) {
				g.Expect(strings.TrimSpace(string(stdout))).To(Equal("done: " + toolWord))
			})
		})
	}
})

// toolWord is what the agent's shell tool prints; the upstream's last
// answer repeats it, so the client's final text proves the round trip.
const toolWord = "hello-from-tool"

// agentUsage is what each upstream answer of an agent spec reports.
var agentUsage = fakeupstream.Usage{InputTokens: 1234, OutputTokens: 17}

// runAgentRoundTrip starts the upstream named up with an agent's script, a
// private route for model to it in a new tenant's namespace (so that the
// agent's own model name is the route's), runs the agent and checks its
// output, the upstream's two calls and their usage rows.
func runAgentRoundTrip(t testing.TB, up, model string, command func(ctx context.Context, base, key, home, dir string) *exec.Cmd, check func(Gomega, []byte)) {
	g := NewWithT(t)
	fake, provider := agentUpstream(t, up)
	fake.Handle(agentTurn)
	acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
	ns := acct.Namespace
	backend := fakeBackendIn(t, ns, "agent-up", provider, fake.URL, fake.Key(), "upstream-"+model)
	switch up {
	case "bedrock":
		backend = bedrockBackendIn(t, ns, "agent-up", fake, "upstream-"+model)
	case "openai-chat":
		backend.Options = map[string]string{"protocols": "chat_completions"}
	case "openai-responses":
		backend.Options = map[string]string{"protocols": "responses"}
	}
	textModel(t, ns, model, backend)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The agent reaches the gateway through a proxy that validates every
	// response against /openapi.json, as the suite's own clients' are.
	proxy, err := apiCheck.Proxy(stack.BaseURL)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	home, dir := t.TempDir(), t.TempDir()
	cmd := command(ctx, proxy.URL, acct.Key, home, dir)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(nil)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	reqs := fake.Requests()
	g.Expect(err).NotTo(HaveOccurred(), "agent failed\nstdout: %s\nstderr: %s\nupstream saw: %s", stdout.Bytes(), tail(stderr.Bytes()), describeRequests(reqs))
	check(g, stdout.Bytes())

	var calls int
	for _, r := range reqs {
		if !r.Rejected {
			calls++
		}
	}
	g.Expect(calls).To(Equal(2), "one call for the tool, one for the answer: %s", describeRequests(reqs))
	for _, r := range reqs {
		g.Expect(r.Rejected).To(BeFalse(), "the upstream refused what the gateway sent: %s", r.Body)
	}
	rows := usageRows(t, acct, calls)
	for _, r := range rows {
		g.Expect(r.ModelName).To(Equal(model))
		g.Expect(r.PromptTokens).To(Equal(agentUsage.InputTokens))
		g.Expect(r.CompletionTokens).To(Equal(agentUsage.OutputTokens))
	}
	ledgerUsed(t, acct, int64(calls)*textQuota(agentUsage.InputTokens, agentUsage.OutputTokens))
}

// agentUpstream starts the fake for up and names its provider.
func agentUpstream(t testing.TB, up string) (*fakeupstream.Server, string) {
	switch up {
	case "anthropic":
		return startFake(t, "anthropic"), "anthropic"
	case "openai-chat", "openai-responses":
		s := startFake(t, "openai")
		return s, "openai"
	case "gemini":
		return startFake(t, "gemini"), "gemini"
	case "bedrock":
		s := fakeupstream.NewBedrock()
		t.Cleanup(s.Close)
		return s, "bedrock"
	}
	t.Fatalf("no upstream %q", up)
	return nil, ""
}

// agentTurn is the upstream's side of the round trip, in whatever protocol
// the request came in: after a tool result, text naming what the tool
// printed; otherwise a call of the shell tool the request declares.
func agentTurn(req fakeupstream.Request) fakeupstream.Reply {
	body := req.JSON()
	if out, ok := lastToolOutput(req.Path, body); ok {
		text := "done: " + toolWord
		if !strings.Contains(out, toolWord) {
			text = "the tool printed something else: " + out
		}
		return fakeupstream.Reply{Text: text, Usage: agentUsage}
	}
	name, arg := shellTool(req.Path, body)
	if name == "" {
		return fakeupstream.Reply{Text: "no shell tool in the request", Usage: agentUsage}
	}
	args, _ := json.Marshal(map[string]string{arg: "echo " + toolWord})
	return fakeupstream.Reply{ToolCall: &fakeupstream.ToolCall{Name: name, Arguments: string(args)}, Usage: agentUsage}
}

// lastToolOutput is the output of the last tool result in the request's
// conversation, if its last turn carries one.
func lastToolOutput(path string, body map[string]any) (string, bool) {
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		msgs := list(body["messages"])
		for i := len(msgs) - 1; i >= 0; i-- {
			m := obj(msgs[i])
			if m["role"] != "user" {
				continue
			}
			for _, b := range list(m["content"]) {
				if bl := obj(b); bl["type"] == "tool_result" {
					return textOf(bl["content"]), true
				}
			}
			return "", false
		}
	case strings.HasSuffix(path, "/chat/completions"):
		msgs := list(body["messages"])
		if len(msgs) > 0 && obj(msgs[len(msgs)-1])["role"] == "tool" {
			return textOf(obj(msgs[len(msgs)-1])["content"]), true
		}
	case strings.HasSuffix(path, "/responses"):
		items := list(body["input"])
		for i := len(items) - 1; i >= 0; i-- {
			it := obj(items[i])
			switch it["type"] {
			case "function_call_output", "custom_tool_call_output":
				return textOf(it["output"]), true
			}
			if it["role"] == "user" {
				return "", false
			}
		}
	case strings.Contains(path, ":generateContent") || strings.Contains(path, ":streamGenerateContent"):
		contents := list(body["contents"])
		if len(contents) > 0 {
			for _, p := range list(obj(contents[len(contents)-1])["parts"]) {
				if fr := obj(obj(p)["functionResponse"]); fr != nil {
					b, _ := json.Marshal(fr["response"])
					return string(b), true
				}
			}
		}
	case strings.HasSuffix(path, "/converse") || strings.HasSuffix(path, "/converse-stream"):
		msgs := list(body["messages"])
		if len(msgs) > 0 {
			for _, c := range list(obj(msgs[len(msgs)-1])["content"]) {
				if tr := obj(obj(c)["toolResult"]); tr != nil {
					b, _ := json.Marshal(tr["content"])
					return string(b), true
				}
			}
		}
	}
	return "", false
}

// shellTool finds the tool that runs a shell command (its schema takes a
// command or cmd string) in the request's tools, and that argument's name.
func shellTool(path string, body map[string]any) (name, arg string) {
	type decl struct {
		name   string
		schema map[string]any
	}
	var decls []decl
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		for _, t := range list(body["tools"]) {
			decls = append(decls, decl{str(obj(t)["name"]), obj(obj(t)["input_schema"])})
		}
	case strings.HasSuffix(path, "/chat/completions"):
		for _, t := range list(body["tools"]) {
			f := obj(obj(t)["function"])
			decls = append(decls, decl{str(f["name"]), obj(f["parameters"])})
		}
	case strings.HasSuffix(path, "/responses"):
		for _, t := range list(body["tools"]) {
			decls = append(decls, decl{str(obj(t)["name"]), obj(obj(t)["parameters"])})
		}
	case strings.Contains(path, "enerateContent"):
		for _, t := range list(body["tools"]) {
			for _, f := range list(obj(t)["functionDeclarations"]) {
				schema := obj(obj(f)["parameters"])
				if schema == nil {
					schema = obj(obj(f)["parametersJsonSchema"])
				}
				decls = append(decls, decl{str(obj(f)["name"]), schema})
			}
		}
	case strings.Contains(path, "/converse"):
		for _, t := range list(obj(body["toolConfig"])["tools"]) {
			spec := obj(obj(t)["toolSpec"])
			decls = append(decls, decl{str(spec["name"]), obj(obj(spec["inputSchema"])["json"])})
		}
	}
	for _, d := range decls {
		props := obj(d.schema["properties"])
		for _, a := range []string{"command", "cmd"} {
			if obj(props[a]) != nil && (d.name == "Bash" || d.name == "exec_command" || d.name == "shell") {
				return d.name, a
			}
		}
	}
	return "", ""
}

func list(v any) []any         { l, _ := v.([]any); return l }
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func str(v any) string         { s, _ := v.(string); return s }
func lastLine(b []byte) []byte {
	l := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return l[len(l)-1]
}
func agentEnv(home string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8"}
}

// textOf is the text of a tool output: a string, or the text of its parts.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	for _, p := range list(v) {
		b.WriteString(str(obj(p)["text"]))
	}
	return b.String()
}

// codexConfig points the Codex CLI at the gateway's Responses endpoint as
// its users do (a model provider with wire_api responses), without the
// network it would reach for otherwise, and without retries.
func codexConfig(base, model string) string {
	return fmt.Sprintf(`model = %q
model_provider = "modelgate"

[model_providers.modelgate]
name = "modelgate"
base_url = "%s/v1"
wire_api = "responses"
env_key = "MODELGATE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
`, model, base)
}

// describeRequests lists what the upstream received, for a failure message.
func describeRequests(reqs []fakeupstream.Request) string {
	var b strings.Builder
	for i, r := range reqs {
		fmt.Fprintf(&b, "\n#%d %s %s rejected=%v body=%.2000s", i, r.Method, r.Path, r.Rejected, r.Body)
	}
	return b.String()
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// agents are the installed agent binaries.
type agents struct{ claude, codex string }

// requireAgents finds Claude Code and the Codex CLI that hack/tools.sh
// agents installed (MODELGATE_AGENTS_DIR, else the newest under bin/agents);
// without them the spec fails under CI=true and skips, loudly, elsewhere.
func requireAgents(t testing.TB) agents {
	dir := os.Getenv("MODELGATE_AGENTS_DIR")
	if dir == "" {
		found, _ := filepath.Glob(filepath.Join("..", "..", "bin", "agents", "*"))
		sort.Strings(found)
		if len(found) > 0 {
			dir = found[len(found)-1]
		}
	}
	dir, _ = filepath.Abs(dir) // the agents run in a directory of their own
	a := agents{
		claude: filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude"),
		codex:  filepath.Join(dir, "node_modules", "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex"),
	}
	for _, bin := range []string{a.claude, a.codex} {
		if _, err := os.Stat(bin); err != nil {
			msg := fmt.Sprintf("the coding agents are not installed (%v): run hack/tools.sh agents", err)
			if os.Getenv("CI") == "true" {
				Fail(msg)
			}
			Skip("SKIPPED LOUDLY: " + msg)
		}
	}
	return a
}
