package translate

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Tools across protocols. Every target of a translation gets a flat list of
// JSON-schema functions whose names are valid everywhere
// (^[a-zA-Z0-9_-]{1,64}$, Anthropic's and Bedrock's rule, which OpenAI's and
// Gemini's accept too). Two kinds of client tools do not fit that as they
// are:
//
//   - responses namespace tools (and the tools of additional_tools input
//     items) live in a namespace: a tool is sent as "<namespace>__<name>";
//   - freeform (custom) tools take text, not JSON: a tool is sent as a
//     function of one string parameter "input", described by its format.
//
// A name that is not valid, too long or taken by another tool becomes its
// valid prefix (at most 55 bytes) plus "_" and 8 hex digits of a hash of
// the namespace and name. The ToolMap keeps what was changed, so that the
// upstream's calls reach the client as calls of its own tools again.

// ToolMap maps the tool names a translated request gave the upstream back to
// the client's tools: their names, namespaces and whether they are freeform.
// TranslateRequest returns it; TranslateResponse and StreamOptions take it.
// A nil ToolMap maps nothing (the names were sent as they were).
type ToolMap struct {
	byUpstream map[string]toolOrigin
}

// toolOrigin is a client tool: its namespace, name and kind.
type toolOrigin struct {
	namespace, name string
	custom          bool
}

func (m *ToolMap) origin(upstreamName string) (toolOrigin, bool) {
	if m == nil {
		return toolOrigin{}, false
	}
	o, ok := m.byUpstream[upstreamName]
	return o, ok
}

// restorePart turns a tool call of the upstream into a call of the client's
// tool: its name, its namespace and, for a freeform tool, its input text.
func (m *ToolMap) restorePart(p *Part) {
	if p.Type != PartToolCall {
		return
	}
	o, ok := m.origin(p.Name)
	if !ok {
		return
	}
	p.Name, p.Namespace = o.name, o.namespace
	if o.custom {
		p.Custom, p.Input = true, customInput(p.Arguments)
	}
}

// toolNameMax is the longest tool name every protocol accepts.
const toolNameMax = 64

// validToolName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$.
func validToolName(s string) bool {
	if s == "" || len(s) > toolNameMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !toolNameByte(s[i]) {
			return false
		}
	}
	return true
}

func toolNameByte(c byte) bool {
	return c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// namespaceSeparator joins a namespace and a tool name into one name.
const namespaceSeparator = "__"

// joinedToolName is the name a tool gets when it needs no hash: its name,
// or namespace__name.
func joinedToolName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + namespaceSeparator + name
}

// hashedToolName is a valid name for a tool whose joined name is invalid,
// too long or taken: its valid bytes (others replaced by "_"), at most 55
// of them, then "_" and 8 hex digits of a hash of namespace and name
// (salted by try, for the rare hash collision).
func hashedToolName(namespace, name string, try int) string {
	joined := joinedToolName(namespace, name)
	b := make([]byte, 0, toolNameMax)
	for i := 0; i < len(joined) && len(b) < toolNameMax-9; i++ {
		c := joined[i]
		if !toolNameByte(c) {
			c = '_'
		}
		b = append(b, c)
	}
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(name))
	for range try {
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	b = append(b, '_')
	return string(hex.AppendEncode(b, sum[:4]))
}

// toolNamer assigns upstream names to a request's tools.
type toolNamer struct {
	names map[toolOrigin]string // client tool → upstream name (custom is false in keys)
	used  map[string]toolOrigin // upstream name → client tool
	m     ToolMap
}

func originKey(namespace, name string) toolOrigin {
	return toolOrigin{namespace: namespace, name: name}
}

// reserve gives a tool that needs no change its own name, when it is free.
func (n *toolNamer) reserve(namespace, name string) {
	k := originKey(namespace, name)
	if _, ok := n.names[k]; ok || namespace != "" || !validToolName(name) {
		return
	}
	if _, taken := n.used[name]; !taken {
		n.names[k], n.used[name] = name, k
	}
}

// name returns the upstream name of a tool, assigning one if it has none,
// and records in the map what the upstream name stands for.
func (n *toolNamer) name(namespace, name string, custom bool) string {
	k := originKey(namespace, name)
	up, ok := n.names[k]
	if !ok {
		up = joinedToolName(namespace, name)
		for try := 0; ; try++ {
			if _, taken := n.used[up]; !taken && validToolName(up) {
				break
			}
			up = hashedToolName(namespace, name, try)
		}
		n.names[k], n.used[up] = up, k
	}
	if up != name || namespace != "" || custom {
		if n.m.byUpstream == nil {
			n.m.byUpstream = map[string]toolOrigin{}
		}
		o := n.m.byUpstream[up]
		n.m.byUpstream[up] = toolOrigin{namespace: namespace, name: name, custom: custom || o.custom}
	}
	return up
}

// lookup returns the upstream name for a tool named in a tool choice, which
// names no namespace: the tool of that name outside any namespace, else
// the first of that name in one.
func (n *toolNamer) lookup(r *Request, name string) string {
	if up, ok := n.names[originKey("", name)]; ok {
		return up
	}
	for _, t := range r.Tools {
		if t.Name == name {
			return n.names[originKey(t.Namespace, t.Name)]
		}
	}
	return name
}

// prepareTools rewrites r for a target without namespaces or freeform
// tools: every tool becomes a plain function with an upstream name, every
// tool call in the history a call of that function, and the tool choice
// names the upstream names. It returns the map back (nil when nothing was
// renamed and no tool is freeform).
func prepareTools(r *Request) *ToolMap {
	if len(r.Tools) == 0 && !hasToolCalls(r) {
		return nil // nothing to name: no work for the usual chat turn
	}
	n := &toolNamer{names: map[toolOrigin]string{}, used: map[string]toolOrigin{}}
	// Tools that keep their names first, so that a flattened name never
	// takes a name the client gave a tool of its own.
	for _, t := range r.Tools {
		n.reserve(t.Namespace, t.Name)
	}
	ups := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		ups[i] = n.name(t.Namespace, t.Name, t.Custom)
	}
	if tc := r.ToolChoice; tc != nil { // by the client's names, before renaming
		if tc.Mode == "tool" {
			tc.Name = n.lookup(r, tc.Name)
		}
		for i, a := range tc.Allowed {
			tc.Allowed[i] = n.lookup(r, a)
		}
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.Custom {
			t.Parameters = customParameters(t.Format)
		}
		t.Name, t.Namespace, t.Custom, t.Format = ups[i], "", false, nil
	}
	for i := range r.Messages {
		parts := r.Messages[i].Parts
		for j := range parts {
			p := &parts[j]
			if p.Type != PartToolCall {
				continue
			}
			n.reserve(p.Namespace, p.Name)
			p.Name = n.name(p.Namespace, p.Name, p.Custom)
			if p.Custom {
				p.Arguments = string(mustJSON(map[string]string{"input": p.Input}))
			}
			p.Namespace, p.Custom, p.Input = "", false, ""
		}
	}
	if n.m.byUpstream == nil {
		return nil
	}
	return &n.m
}

func hasToolCalls(r *Request) bool {
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Type == PartToolCall {
				return true
			}
		}
	}
	return false
}

// narrowTools keeps the tools a choice's Allowed list names, for targets
// without an allowed-tools list; a list that names none of them keeps all.
func narrowTools(r *Request) []Tool {
	tc := r.ToolChoice
	if tc == nil || len(tc.Allowed) == 0 {
		return r.Tools
	}
	var out []Tool
	for _, t := range r.Tools {
		for _, a := range tc.Allowed {
			if t.Name == a {
				out = append(out, t)
				break
			}
		}
	}
	if len(out) == 0 {
		return r.Tools
	}
	return out
}

// maxFormatText bounds the grammar text a freeform tool's input parameter
// carries in its description.
const maxFormatText = 8 << 10

// customParameters is the JSON schema of the function a freeform tool
// becomes: one required string "input", whose description is the tool's
// input format (its grammar, cut at maxFormatText bytes).
func customParameters(format json.RawMessage) json.RawMessage {
	desc := customFormatText(format)
	d := make([]byte, 0, 128+len(desc))
	d = append(d, `{"type":"object","properties":{"input":{"type":"string","description":`...)
	d = appendJSONString(d, desc)
	return append(d, `}},"required":["input"]}`...)
}

// customFormatText describes a freeform tool's input format: the responses
// shape {type:"grammar", syntax, definition} or the chat one {type:"grammar",
// grammar:{syntax, definition}}; anything else is free text.
func customFormatText(format json.RawMessage) string {
	var f struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
		Grammar    *struct {
			Syntax     string `json:"syntax"`
			Definition string `json:"definition"`
		} `json:"grammar"`
	}
	_ = json.Unmarshal(format, &f)
	if f.Grammar != nil {
		f.Syntax, f.Definition = f.Grammar.Syntax, f.Grammar.Definition
	}
	if f.Type != "grammar" || f.Definition == "" {
		return "The tool's input, as free text."
	}
	syntax := f.Syntax
	if syntax == "" {
		syntax = "lark"
	}
	def := f.Definition
	if len(def) > maxFormatText {
		cut := maxFormatText
		for cut > 0 && !utf8.RuneStart(def[cut]) {
			cut--
		}
		def = def[:cut] + "\n… (grammar cut)"
	}
	return "The tool's input, as free text that matches this " + syntax + " grammar:\n" + def
}

// customInput is the text of a freeform tool's call from the arguments of
// the function it became: the "input" string, else a JSON string, else the
// arguments as they are.
func customInput(args string) string {
	var obj struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &obj) == nil && obj.Input != nil {
		return *obj.Input
	}
	var s string
	if json.Unmarshal([]byte(args), &s) == nil {
		return s
	}
	return args
}

// Thinking carried by the client. A responses client keeps an upstream's
// thinking as a reasoning item whose encrypted_content is ours: the prefix,
// then base64 of {"p": signing protocol, "t": thinking text, "s": signature,
// "r": redacted data}. The client sends the item back on its next turn and
// it becomes the thinking block again. OpenAI's own encrypted_content (any
// other value) is opaque to the gateway.
const reasoningPrefix = "modelgate.thinking.v1:"

type reasoningBlob struct {
	Signer    Protocol `json:"p,omitempty"`
	Text      string   `json:"t,omitempty"`
	Signature string   `json:"s,omitempty"`
	Redacted  string   `json:"r,omitempty"`
}

// encodeReasoning is the encrypted_content of a thinking part, or "" when
// it has nothing to carry back (no signature, no redacted data).
func encodeReasoning(p Part, signer Protocol) string {
	if p.Signature == "" && p.Redacted == "" {
		return ""
	}
	b, _ := json.Marshal(reasoningBlob{Signer: signer, Text: p.Text, Signature: p.Signature, Redacted: p.Redacted})
	return reasoningPrefix + base64.StdEncoding.EncodeToString(b)
}

// decodeReasoning reads encrypted_content of ours into a thinking part.
func decodeReasoning(enc string) (Part, bool) {
	rest, ok := strings.CutPrefix(enc, reasoningPrefix)
	if !ok {
		return Part{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return Part{}, false
	}
	var b reasoningBlob
	if json.Unmarshal(raw, &b) != nil {
		return Part{}, false
	}
	return Part{Type: PartThinking, Text: b.Text, Signature: b.Signature, Redacted: b.Redacted, Signer: b.Signer}, true
}
