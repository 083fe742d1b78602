package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/apierr"
)

// Codec of the responses protocol (OpenAI Responses API wire format):
// streams.

// ---- streaming: decoder (responses upstream → neutral) ----

type responsesDecoder struct {
	started  bool
	finished bool
	next     int
	blocks   map[[2]int]int // (output_index, content_index) → neutral index; content_index -1 for whole items
	sawTool  bool
}

type responsesStreamEvent struct {
	Type         string         `json:"type"`
	OutputIndex  int            `json:"output_index"`
	ContentIndex int            `json:"content_index"`
	Delta        string         `json:"delta"`
	Item         *responsesItem `json:"item"`
	Part         *struct {
		Type string `json:"type"`
	} `json:"part"`
	Response *responsesResponse `json:"response"`
	Message  string             `json:"message"`
	Code     string             `json:"code"`
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
	var e responsesStreamEvent
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
		msg, code := e.Message, e.Code
		if e.Response != nil && len(e.Response.Error) > 0 {
			msg, _ = FieldString(e.Response.Error, "message")
			code, _ = FieldString(e.Response.Error, "code")
		}
		out = append(out, StreamEvent{Kind: EvError, ErrStatus: errStatus(code), Message: msg})
	}
	return out, nil
}

func (d *responsesDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	return append(out, StreamEvent{Kind: EvError, ErrStatus: http.StatusBadGateway, Message: "upstream stream ended before response.completed"})
}

// ---- streaming: encoder (neutral → responses client) ----

type responsesEncoder struct {
	id       string
	model    string
	created  int64
	seq      int64
	started  bool
	finished bool
	// signer is the upstream protocol whose thinking signatures the
	// stream carries (see encodeReasoning).
	signer  Protocol
	items   [][]byte                   // finished output items
	open    map[int]*responsesOpenItem // neutral index → open item
	order   []int                      // open neutral indexes
	scratch []byte
}

// responsesOpenItem is an output item being streamed. A freeform tool's
// call (custom) gathers the arguments of the function it became and sends
// its input text once the call is complete: the text is inside that JSON.
type responsesOpenItem struct {
	part      PartType
	outIdx    int
	itemID    string
	callID    string
	name      string
	namespace string
	custom    bool
	redacted  string
	text      strings.Builder
	signature strings.Builder
}

func newResponsesEncoder(model string) *responsesEncoder {
	return &responsesEncoder{id: NewID("resp_"), model: model, created: time.Now().Unix(), open: map[int]*responsesOpenItem{}}
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
		o := &responsesOpenItem{part: ev.Part, outIdx: len(e.items) + len(e.order), callID: ev.ID, name: ev.Name,
			namespace: ev.Namespace, custom: ev.Custom, redacted: ev.Redacted}
		e.open[ev.Index] = o
		e.order = append(e.order, ev.Index)
		switch ev.Part {
		case PartToolCall:
			o.itemID = NewID("fc_")
			if o.custom {
				o.itemID = NewID("ctc_")
			}
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
		case PartThinking:
			o.itemID = NewID("rs_")
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
			if o.redacted == "" {
				out = e.event(out, "response.reasoning_summary_part.added", e.partBody(o, "summary_index", `"part":{"type":"summary_text","text":""}`))
			}
		default:
			o.itemID = NewID("msg_")
			out = e.event(out, "response.output_item.added", e.itemBody(o, "in_progress", true))
			out = e.event(out, "response.content_part.added", e.partBody(o, "content_index", `"part":{"type":"output_text","text":"","annotations":[]}`))
		}
	case EvDelta:
		o, ok := e.open[ev.Index]
		if !ok {
			return out
		}
		if ev.Signature != "" {
			o.signature.WriteString(ev.Signature)
			return out
		}
		if ev.Text == "" || o.redacted != "" {
			return out
		}
		o.text.WriteString(ev.Text)
		if o.custom {
			return out // sent whole when the call is complete
		}
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
		eo := []byte(`{"code":`)
		eo = appendJSONString(eo, apierr.OpenAIType(ev.ErrStatus))
		eo = append(eo, `,"message":`...)
		eo = appendJSONString(eo, ev.Message)
		eo = append(eo, '}')
		out = e.event(out, "response.failed", e.object("failed", "", nil, eo))
	}
	return out
}

func (e *responsesEncoder) itemBody(o *responsesOpenItem, status string, added bool) []byte {
	d := make([]byte, 0, 160)
	d = append(d, `"output_index":`...)
	d = appendInt(d, int64(o.outIdx))
	d = append(d, `,"item":`...)
	if added {
		switch o.part {
		case PartToolCall:
			if o.custom {
				d = append(d, `{"type":"custom_tool_call","id":`...)
				d = appendJSONString(d, o.itemID)
				d = append(d, `,"call_id":`...)
				d = appendJSONString(d, o.callID)
				d = appendNamespace(d, o.namespace)
				d = append(d, `,"name":`...)
				d = appendJSONString(d, o.name)
				d = append(d, `,"input":""}`...)
				break
			}
			d = append(d, `{"type":"function_call","id":`...)
			d = appendJSONString(d, o.itemID)
			d = append(d, `,"call_id":`...)
			d = appendJSONString(d, o.callID)
			d = appendNamespace(d, o.namespace)
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

func (e *responsesEncoder) finishedItem(o *responsesOpenItem, status string) []byte {
	p := Part{Type: o.part, Text: o.text.String(), Signature: o.signature.String(), Redacted: o.redacted}
	if o.part == PartToolCall {
		p = Part{Type: PartToolCall, ID: o.callID, Name: o.name, Namespace: o.namespace, Arguments: o.text.String()}
		if o.custom {
			p.Custom, p.Input = true, customInput(p.Arguments)
		}
	}
	return encodeResponsesItem(p, o.itemID, status, e.signer)
}

func (e *responsesEncoder) partBody(o *responsesOpenItem, indexName, part string) []byte {
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
	switch {
	case o.part == PartToolCall && o.custom:
		input := customInput(text)
		d := make([]byte, 0, 96+len(input))
		d = append(d, `"item_id":`...)
		d = appendJSONString(d, o.itemID)
		d = append(d, `,"output_index":`...)
		d = appendInt(d, int64(o.outIdx))
		prefix := len(d)
		d = append(d, `,"delta":`...)
		d = appendJSONString(d, input)
		if input != "" {
			out = e.event(out, "response.custom_tool_call_input.delta", d)
		}
		d = append(d[:prefix:prefix], `,"input":`...)
		d = appendJSONString(d, input)
		out = e.event(out, "response.custom_tool_call_input.done", d)
	case o.part == PartToolCall:
		d := make([]byte, 0, 96+len(text))
		d = append(d, `"item_id":`...)
		d = appendJSONString(d, o.itemID)
		d = append(d, `,"output_index":`...)
		d = appendInt(d, int64(o.outIdx))
		d = append(d, `,"arguments":`...)
		d = appendJSONString(d, text)
		out = e.event(out, "response.function_call_arguments.done", d)
	case o.part == PartThinking && o.redacted != "":
	case o.part == PartThinking:
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
