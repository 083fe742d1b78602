package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Codec of the responses protocol (OpenAI Responses API wire format).

type rReq struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       string          `json:"instructions,omitempty"`
	MaxOutputTokens    *int64          `json:"max_output_tokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"top_p,omitempty"`
	Stream             bool            `json:"stream,omitempty"`
	Tools              []rTool         `json:"tools,omitempty"`
	ToolChoice         json.RawMessage `json:"tool_choice,omitempty"`
	Reasoning          *rReasoning     `json:"reasoning,omitempty"`
	PreviousResponseID string          `json:"previous_response_id,omitempty"`
	User               string          `json:"user,omitempty"`
}

type rReasoning struct {
	Effort string `json:"effort,omitempty"`
}

type rTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type rItem struct {
	Type      string          `json:"type,omitempty"`
	ID        string          `json:"id,omitempty"`
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Summary   []rContent      `json:"summary,omitempty"`
}

type rContent struct {
	Type        string             `json:"type"`
	Text        string             `json:"text,omitempty"`
	ImageURL    string             `json:"image_url,omitempty"`
	Annotations *[]json.RawMessage `json:"annotations,omitempty"`
	Refusal     string             `json:"refusal,omitempty"`
}

type rUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens,omitempty"`
	} `json:"input_tokens_details,omitempty"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details,omitempty"`
	TotalTokens int64 `json:"total_tokens"`
}

type rResp struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails *rIncomplete    `json:"incomplete_details"`
	Model             string          `json:"model"`
	Output            []rItem         `json:"output"`
	Usage             *rUsage         `json:"usage"`
}

type rIncomplete struct {
	Reason string `json:"reason"`
}

func (u *rUsage) toUsage() Usage {
	out := Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ReportedTotalTokens: ptr(u.TotalTokens)}
	if d := u.InputTokensDetails; d != nil && d.CachedTokens != nil {
		out.CacheReadTokens = ptr(*d.CachedTokens)
		out.InputTokens -= *d.CachedTokens
	}
	if d := u.OutputTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

func appendResponsesUsage(d []byte, u Usage) []byte {
	p := u.PromptTokens()
	d = append(d, `{"input_tokens":`...)
	d = appendInt(d, p)
	d = append(d, `,"input_tokens_details":{"cached_tokens":`...)
	d = appendInt(d, deref(u.CacheReadTokens))
	d = append(d, `},"output_tokens":`...)
	d = appendInt(d, u.OutputTokens)
	d = append(d, `,"output_tokens_details":{"reasoning_tokens":`...)
	d = appendInt(d, u.ReasoningTokens)
	d = append(d, `},"total_tokens":`...)
	d = appendInt(d, p+u.OutputTokens)
	return append(d, '}')
}

// ---- requests ----

func decodeResponsesRequest(body []byte) (*Request, error) {
	var in rReq
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses request: %w", err)
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream, User: in.User}
	if in.MaxOutputTokens != nil {
		r.MaxTokens = *in.MaxOutputTokens
	}
	if in.Instructions != "" {
		r.System = []string{in.Instructions}
	}
	if in.Reasoning != nil {
		r.ReasoningEffort = in.Reasoning.Effort
	}
	if s, ok := rawString(in.Input); ok {
		r.Messages = []Message{{Role: "user", Parts: []Part{{Type: PartText, Text: s}}}}
	} else if len(in.Input) > 0 {
		var items []rItem
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return nil, fmt.Errorf("responses input: %w", err)
		}
		for _, it := range items {
			switch it.Type {
			case "", "message":
				if it.Role == "system" || it.Role == "developer" {
					r.System = append(r.System, responsesText(it.Content))
					continue
				}
				parts, err := responsesParts(it.Content)
				if err != nil {
					return nil, err
				}
				role := "user"
				if it.Role == "assistant" {
					role = "assistant"
				}
				r.appendParts(role, parts...)
			case "function_call":
				args := ""
				if it.Arguments != nil {
					args = *it.Arguments
				}
				r.appendParts("assistant", Part{Type: PartToolCall, ID: it.CallID, Name: it.Name, Arguments: args})
			case "function_call_output":
				out, _ := rawString(it.Output)
				if out == "" && len(it.Output) > 0 && it.Output[0] == '[' {
					out = responsesText(it.Output)
				}
				r.appendParts("user", Part{Type: PartToolResult, ID: it.CallID, Text: out})
			case "reasoning":
				var b strings.Builder
				for _, s := range it.Summary {
					b.WriteString(s.Text)
				}
				r.appendParts("assistant", Part{Type: PartThinking, Text: b.String()})
			}
		}
	}
	for _, t := range in.Tools {
		if t.Type != "function" {
			continue // web_search_preview etc. have no equivalent upstream
		}
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	r.ToolChoice = decodeOpenAIToolChoice(in.ToolChoice)
	return r, nil
}

// appendParts adds parts to the last message when it has the same role (so a
// run of function_call items becomes one assistant turn), else a new one.
func (r *Request) appendParts(role string, parts ...Part) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && role == "assistant" {
		r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, parts...)
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && len(parts) > 0 && parts[0].Type == PartToolResult {
		last := r.Messages[n-1].Parts
		if len(last) > 0 && last[len(last)-1].Type == PartToolResult {
			r.Messages[n-1].Parts = append(last, parts...)
			return
		}
	}
	r.Messages = append(r.Messages, Message{Role: role, Parts: parts})
}

func responsesText(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	var cs []rContent
	if json.Unmarshal(raw, &cs) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Text)
	}
	return b.String()
}

func responsesParts(raw json.RawMessage) ([]Part, error) {
	if s, ok := rawString(raw); ok {
		return []Part{{Type: PartText, Text: s}}, nil
	}
	var cs []rContent
	if err := json.Unmarshal(raw, &cs); err != nil {
		return nil, fmt.Errorf("responses content: %w", err)
	}
	out := make([]Part, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case "input_text", "output_text", "text":
			out = append(out, Part{Type: PartText, Text: c.Text})
		case "refusal":
			out = append(out, Part{Type: PartText, Text: c.Refusal})
		case "input_image":
			out = append(out, imagePart(c.ImageURL))
		}
	}
	return out, nil
}

func encodeResponsesRequest(r *Request, model string) ([]byte, error) {
	out := rReq{Model: model, Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream, User: r.User,
		Instructions: strings.Join(r.System, "\n\n")}
	if r.MaxTokens > 0 {
		out.MaxOutputTokens = ptr(r.MaxTokens)
	}
	if r.ReasoningEffort != "" {
		out.Reasoning = &rReasoning{Effort: r.ReasoningEffort}
	}
	items := make([]any, 0, len(r.Messages))
	for _, m := range r.Messages {
		var content []rContent
		flush := func() {
			if len(content) > 0 {
				items = append(items, rItem{Type: "message", Role: m.Role, Content: mustJSON(content)})
				content = nil
			}
		}
		for _, p := range m.Parts {
			switch p.Type {
			case PartText:
				if m.Role == "assistant" {
					content = append(content, rContent{Type: "output_text", Text: p.Text, Annotations: &[]json.RawMessage{}})
				} else {
					content = append(content, rContent{Type: "input_text", Text: p.Text})
				}
			case PartImage:
				content = append(content, rContent{Type: "input_image", ImageURL: imageURL(p)})
			case PartToolCall:
				flush()
				args := string(validJSONOr(p.Arguments, "{}"))
				items = append(items, rItem{Type: "function_call", CallID: p.ID, Name: p.Name, Arguments: &args})
			case PartToolResult:
				flush()
				items = append(items, rItem{Type: "function_call_output", CallID: p.ID, Output: mustJSON(p.Text)})
			}
		}
		flush()
	}
	out.Input = mustJSON(items)
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, rTool{Type: "function", Name: t.Name, Description: t.Description,
			Parameters: validJSONOr(string(t.Parameters), `{"type":"object"}`)})
	}
	if tc := r.ToolChoice; tc != nil && len(out.Tools) > 0 {
		if tc.Mode == "tool" {
			out.ToolChoice = mustJSON(map[string]string{"type": "function", "name": tc.Name})
		} else {
			out.ToolChoice = mustJSON(tc.Mode)
		}
	}
	return json.Marshal(out)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- responses ----

func decodeResponsesResponse(body []byte) (*Response, error) {
	var in rResp
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses response: %w", err)
	}
	r := &Response{ID: in.ID, Model: in.Model, Created: in.CreatedAt}
	if in.Usage != nil {
		r.Usage = in.Usage.toUsage()
	}
	for _, it := range in.Output {
		switch it.Type {
		case "message":
			if t := responsesText(it.Content); t != "" {
				r.Parts = append(r.Parts, Part{Type: PartText, Text: t})
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			r.Parts = append(r.Parts, Part{Type: PartToolCall, ID: it.CallID, Name: it.Name, Arguments: args})
		case "reasoning":
			var b strings.Builder
			for _, s := range it.Summary {
				b.WriteString(s.Text)
			}
			r.Parts = append(r.Parts, Part{Type: PartThinking, Text: b.String()})
		}
	}
	r.Stop = stopFromResponses(in.Status, in.IncompleteDetails, r.Parts)
	return r, nil
}

func stopFromResponses(status string, inc *rIncomplete, parts []Part) StopReason {
	if status == "incomplete" && inc != nil {
		if inc.Reason == "content_filter" {
			return StopContentFilter
		}
		return StopMaxTokens
	}
	for _, p := range parts {
		if p.Type == PartToolCall {
			return StopToolUse
		}
	}
	return StopEndTurn
}

func responsesStatus(s StopReason) (status string, incomplete string) {
	switch s {
	case StopMaxTokens:
		return "incomplete", "max_output_tokens"
	case StopContentFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

func encodeResponsesResponse(r *Response) ([]byte, error) {
	id := r.ID
	if !strings.HasPrefix(id, "resp_") {
		id = NewID("resp_")
	}
	created := r.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	var items [][]byte
	for _, p := range r.Parts {
		items = append(items, responsesItem(p, "", "completed"))
	}
	status, inc := responsesStatus(r.Stop)
	return responsesObject(id, created, r.Model, status, inc, items, &r.Usage, nil), nil
}

// responsesItem renders one output item of a finished part; id is the item's
// ID (generated when empty).
func responsesItem(p Part, id, status string) []byte {
	d := make([]byte, 0, 128+len(p.Text)+len(p.Arguments))
	switch p.Type {
	case PartToolCall:
		if id == "" {
			id = NewID("fc_")
		}
		d = append(d, `{"type":"function_call","id":`...)
		d = appendJSONString(d, id)
		d = append(d, `,"call_id":`...)
		d = appendJSONString(d, p.ID)
		d = append(d, `,"name":`...)
		d = appendJSONString(d, p.Name)
		d = append(d, `,"arguments":`...)
		d = appendJSONString(d, p.Arguments)
		d = append(d, `,"status":`...)
		d = appendJSONString(d, status)
		return append(d, '}')
	case PartThinking:
		if id == "" {
			id = NewID("rs_")
		}
		d = append(d, `{"type":"reasoning","id":`...)
		d = appendJSONString(d, id)
		d = append(d, `,"summary":[`...)
		if p.Text != "" {
			d = append(d, `{"type":"summary_text","text":`...)
			d = appendJSONString(d, p.Text)
			d = append(d, '}')
		}
		return append(d, "]}"...)
	default:
		if id == "" {
			id = NewID("msg_")
		}
		d = append(d, `{"type":"message","id":`...)
		d = appendJSONString(d, id)
		d = append(d, `,"status":`...)
		d = appendJSONString(d, status)
		d = append(d, `,"role":"assistant","content":[`...)
		d = append(d, `{"type":"output_text","text":`...)
		d = appendJSONString(d, p.Text)
		return append(d, `,"annotations":[]}]}`...)
	}
}

// responsesObject renders a Response object.
func responsesObject(id string, created int64, model, status, incomplete string, items [][]byte, u *Usage, errObj []byte) []byte {
	n := 400
	for _, it := range items {
		n += len(it) + 1
	}
	d := make([]byte, 0, n)
	d = append(d, `{"id":`...)
	d = appendJSONString(d, id)
	d = append(d, `,"object":"response","created_at":`...)
	d = appendInt(d, created)
	d = append(d, `,"status":`...)
	d = appendJSONString(d, status)
	d = append(d, `,"error":`...)
	if errObj != nil {
		d = append(d, errObj...)
	} else {
		d = append(d, "null"...)
	}
	d = append(d, `,"incomplete_details":`...)
	if incomplete != "" {
		d = append(d, `{"reason":`...)
		d = appendJSONString(d, incomplete)
		d = append(d, '}')
	} else {
		d = append(d, "null"...)
	}
	d = append(d, `,"model":`...)
	d = appendJSONString(d, model)
	d = append(d, `,"output":[`...)
	for i, it := range items {
		if i > 0 {
			d = append(d, ',')
		}
		d = append(d, it...)
	}
	d = append(d, `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"text":{"format":{"type":"text"}},"usage":`...)
	if u != nil {
		d = appendResponsesUsage(d, *u)
	} else {
		d = append(d, "null"...)
	}
	return append(d, '}')
}

func responsesUsageOf(body []byte) (Usage, bool) {
	raw, ok := FieldRaw(body, "usage")
	if !ok {
		raw, ok = FieldRaw(body, "response", "usage")
	}
	if !ok || string(raw) == "null" {
		return Usage{}, false
	}
	var u rUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}

// ---- streaming: decoder (responses upstream → neutral) ----

type responsesDecoder struct {
	started  bool
	finished bool
	next     int
	blocks   map[[2]int]int // (output_index, content_index) → neutral index; content_index -1 for whole items
	sawTool  bool
}

type rEvent struct {
	Type         string `json:"type"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
	Item         *rItem `json:"item"`
	Part         *struct {
		Type string `json:"type"`
	} `json:"part"`
	Response *rResp `json:"response"`
	Message  string `json:"message"`
	Code     string `json:"code"`
}

func newResponsesDecoder() *responsesDecoder {
	return &responsesDecoder{blocks: map[[2]int]int{}}
}

func (d *responsesDecoder) start(out []StreamEvent, key [2]int, part PartType, id, name string) []StreamEvent {
	idx := d.next
	d.next++
	d.blocks[key] = idx
	return append(out, StreamEvent{Kind: EvBlockStart, Index: idx, Part: part, ID: id, Name: name})
}

func (d *responsesDecoder) stop(out []StreamEvent, key [2]int) []StreamEvent {
	if idx, ok := d.blocks[key]; ok {
		delete(d.blocks, key)
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: idx})
	}
	return out
}

func (d *responsesDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	if d.finished {
		return out, nil
	}
	var e rEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return out, fmt.Errorf("responses stream event: %w", err)
	}
	whole := [2]int{e.OutputIndex, -1}
	part := [2]int{e.OutputIndex, e.ContentIndex}
	switch e.Type {
	case "response.created":
		d.started = true
		s := StreamEvent{Kind: EvStart}
		if e.Response != nil {
			s.ID = e.Response.ID
		}
		out = append(out, s)
	case "response.output_item.added":
		if e.Item == nil {
			break
		}
		switch e.Item.Type {
		case "function_call":
			d.sawTool = true
			out = d.start(out, whole, PartToolCall, e.Item.CallID, e.Item.Name)
		case "reasoning":
			out = d.start(out, whole, PartThinking, "", "")
		}
	case "response.content_part.added":
		if e.Part != nil && (e.Part.Type == "output_text" || e.Part.Type == "refusal") {
			out = d.start(out, part, PartText, "", "")
		}
	case "response.output_text.delta", "response.refusal.delta":
		idx, ok := d.blocks[part]
		if !ok { // tolerate upstreams that skip content_part.added
			out = d.start(out, part, PartText, "", "")
			idx = d.blocks[part]
		}
		out = append(out, StreamEvent{Kind: EvDelta, Index: idx, Text: e.Delta})
	case "response.function_call_arguments.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if idx, ok := d.blocks[whole]; ok {
			out = append(out, StreamEvent{Kind: EvDelta, Index: idx, Text: e.Delta})
		}
	case "response.content_part.done":
		out = d.stop(out, part)
	case "response.output_item.done":
		out = d.stop(out, whole)
		for key := range d.blocks { // parts whose content_part.done never came
			if key[0] == e.OutputIndex {
				out = d.stop(out, key)
			}
		}
	case "response.completed", "response.incomplete":
		d.finished = true
		f := StreamEvent{Kind: EvFinish, Stop: StopEndTurn}
		if r := e.Response; r != nil {
			if r.Usage != nil {
				f.Usage, f.UsageReported = r.Usage.toUsage(), true
			}
			var parts []Part
			if d.sawTool {
				parts = []Part{{Type: PartToolCall}}
			}
			f.Stop = stopFromResponses(r.Status, r.IncompleteDetails, parts)
		}
		out = append(out, f)
	case "response.failed", "error":
		d.finished = true
		msg := e.Message
		if e.Response != nil && len(e.Response.Error) > 0 {
			msg, _ = FieldString(e.Response.Error, "message")
		}
		out = append(out, StreamEvent{Kind: EvError, ErrType: "api_error", Message: msg})
	}
	return out, nil
}

func (d *responsesDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	return append(out, StreamEvent{Kind: EvError, ErrType: "api_error", Message: "upstream stream ended before response.completed"})
}

// ---- streaming: encoder (neutral → responses client) ----

type responsesEncoder struct {
	id       string
	model    string
	created  int64
	seq      int64
	started  bool
	finished bool
	items    [][]byte       // finished output items
	open     map[int]*rOpen // neutral index → open item
	order    []int          // open neutral indexes
	scratch  []byte
}

type rOpen struct {
	part   PartType
	outIdx int
	itemID string
	callID string
	name   string
	text   strings.Builder
}

func newResponsesEncoder(model string) *responsesEncoder {
	return &responsesEncoder{id: NewID("resp_"), model: model, created: time.Now().Unix(), open: map[int]*rOpen{}}
}

// event renders {"type":<name>,"sequence_number":n,<body>}.
func (e *responsesEncoder) event(out []Event, name string, body []byte) []Event {
	d := make([]byte, 0, len(name)+len(body)+48)
	d = append(d, `{"type":`...)
	d = appendJSONString(d, name)
	d = append(d, `,"sequence_number":`...)
	d = appendInt(d, e.seq)
	e.seq++
	if len(body) > 0 {
		d = append(d, ',')
		d = append(d, body...)
	}
	d = append(d, '}')
	return append(out, Event{Name: name, Data: d})
}

func (e *responsesEncoder) object(status, incomplete string, u *Usage, errObj []byte) []byte {
	d := append(e.scratch[:0], `"response":`...)
	d = append(d, responsesObject(e.id, e.created, e.model, status, incomplete, e.items, u, errObj)...)
	e.scratch = d
	return d
}

func (e *responsesEncoder) encode(ev StreamEvent, out []Event) []Event {
	if e.finished {
		return out
	}
	if !e.started {
		e.started = true
		out = e.event(out, "response.created", e.object("in_progress", "", nil, nil))
		out = e.event(out, "response.in_progress", e.object("in_progress", "", nil, nil))
		if ev.Kind == EvStart {
			return out
		}
	}
	switch ev.Kind {
	case EvBlockStart:
		o := &rOpen{part: ev.Part, outIdx: len(e.items) + len(e.order), callID: ev.ID, name: ev.Name}
		e.open[ev.Index] = o
		e.order = append(e.order, ev.Index)
		switch ev.Part {
		case PartToolCall:
			o.itemID = NewID("fc_")
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
		case PartThinking:
			o.itemID = NewID("rs_")
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
			out = e.event(out, "response.reasoning_summary_part.added", e.partBody(o, "summary_index", `"part":{"type":"summary_text","text":""}`))
		default:
			o.itemID = NewID("msg_")
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
			out = e.event(out, "response.content_part.added", e.partBody(o, "content_index", `"part":{"type":"output_text","text":"","annotations":[]}`))
		}
	case EvDelta:
		o, ok := e.open[ev.Index]
		if !ok || ev.Text == "" {
			return out
		}
		o.text.WriteString(ev.Text)
		d := make([]byte, 0, 96+len(ev.Text))
		d = append(d, `"item_id":`...)
		d = appendJSONString(d, o.itemID)
		d = append(d, `,"output_index":`...)
		d = appendInt(d, int64(o.outIdx))
		switch o.part {
		case PartToolCall:
			d = append(d, `,"delta":`...)
			d = appendJSONString(d, ev.Text)
			out = e.event(out, "response.function_call_arguments.delta", d)
		case PartThinking:
			d = append(d, `,"summary_index":0,"delta":`...)
			d = appendJSONString(d, ev.Text)
			out = e.event(out, "response.reasoning_summary_text.delta", d)
		default:
			d = append(d, `,"content_index":0,"delta":`...)
			d = appendJSONString(d, ev.Text)
			d = append(d, `,"logprobs":[]`...)
			out = e.event(out, "response.output_text.delta", d)
		}
	case EvBlockStop:
		out = e.stopItem(out, ev.Index)
	case EvFinish:
		for len(e.order) > 0 {
			out = e.stopItem(out, e.order[0])
		}
		e.finished = true
		status, inc := responsesStatus(ev.Stop)
		u := ev.Usage
		name := "response.completed"
		if status == "incomplete" {
			name = "response.incomplete"
		}
		out = e.event(out, name, e.object(status, inc, &u, nil))
	case EvError:
		e.finished = true
		typ := ev.ErrType
		if typ == "" {
			typ = "server_error"
		}
		eo := []byte(`{"code":`)
		eo = appendJSONString(eo, typ)
		eo = append(eo, `,"message":`...)
		eo = appendJSONString(eo, ev.Message)
		eo = append(eo, '}')
		out = e.event(out, "response.failed", e.object("failed", "", nil, eo))
	}
	return out
}

func (e *responsesEncoder) itemBody(o *rOpen, status string, added bool) []byte {
	d := make([]byte, 0, 160)
	d = append(d, `"output_index":`...)
	d = appendInt(d, int64(o.outIdx))
	d = append(d, `,"item":`...)
	if added {
		switch o.part {
		case PartToolCall:
			d = append(d, `{"type":"function_call","id":`...)
			d = appendJSONString(d, o.itemID)
			d = append(d, `,"call_id":`...)
			d = appendJSONString(d, o.callID)
			d = append(d, `,"name":`...)
			d = appendJSONString(d, o.name)
			d = append(d, `,"arguments":"","status":"in_progress"}`...)
		case PartThinking:
			d = append(d, `{"type":"reasoning","id":`...)
			d = appendJSONString(d, o.itemID)
			d = append(d, `,"summary":[]}`...)
		default:
			d = append(d, `{"type":"message","id":`...)
			d = appendJSONString(d, o.itemID)
			d = append(d, `,"status":"in_progress","role":"assistant","content":[]}`...)
		}
		return d
	}
	return append(d, e.finishedItem(o, status)...)
}

func (e *responsesEncoder) finishedItem(o *rOpen, status string) []byte {
	p := Part{Type: o.part, Text: o.text.String()}
	if o.part == PartToolCall {
		p = Part{Type: PartToolCall, ID: o.callID, Name: o.name, Arguments: o.text.String()}
	}
	return responsesItem(p, o.itemID, status)
}

func (e *responsesEncoder) partBody(o *rOpen, indexName, part string) []byte {
	d := make([]byte, 0, 160)
	d = append(d, `"item_id":`...)
	d = appendJSONString(d, o.itemID)
	d = append(d, `,"output_index":`...)
	d = appendInt(d, int64(o.outIdx))
	d = append(d, `,"`...)
	d = append(d, indexName...)
	d = append(d, `":0,`...)
	return append(d, part...)
}

func (e *responsesEncoder) stopItem(out []Event, idx int) []Event {
	o, ok := e.open[idx]
	if !ok {
		return out
	}
	delete(e.open, idx)
	for i, v := range e.order {
		if v == idx {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
	text := o.text.String()
	switch o.part {
	case PartToolCall:
		d := make([]byte, 0, 96+len(text))
		d = append(d, `"item_id":`...)
		d = appendJSONString(d, o.itemID)
		d = append(d, `,"output_index":`...)
		d = appendInt(d, int64(o.outIdx))
		d = append(d, `,"arguments":`...)
		d = appendJSONString(d, text)
		out = e.event(out, "response.function_call_arguments.done", d)
	case PartThinking:
		t := appendJSONString(nil, text)
		out = e.event(out, "response.reasoning_summary_text.done", e.partBody(o, "summary_index", `"text":`+string(t)))
		out = e.event(out, "response.reasoning_summary_part.done", e.partBody(o, "summary_index", `"part":{"type":"summary_text","text":`+string(t)+`}`))
	default:
		t := appendJSONString(nil, text)
		out = e.event(out, "response.output_text.done", e.partBody(o, "content_index", `"text":`+string(t)+`,"logprobs":[]`))
		out = e.event(out, "response.content_part.done", e.partBody(o, "content_index", `"part":{"type":"output_text","text":`+string(t)+`,"annotations":[]}`))
	}
	item := e.finishedItem(o, "completed")
	e.items = append(e.items, item)
	d := make([]byte, 0, len(item)+32)
	d = append(d, `"output_index":`...)
	d = appendInt(d, int64(o.outIdx))
	d = append(d, `,"item":`...)
	d = append(d, item...)
	return e.event(out, "response.output_item.done", d)
}
