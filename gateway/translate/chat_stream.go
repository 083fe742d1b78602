package translate

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/modelgate/modelgate/gateway/apierr"
)

// Codec of the chat_completions protocol (OpenAI Chat Completions wire
// format): streams.

// ---- streaming: decoder (chat upstream → neutral) ----

type chatDecoder struct {
	started  bool
	finished bool
	open     int // neutral index of the open block, -1 none
	openPart PartType
	next     int
	tools    map[int]int // tool_calls[].index → neutral index
	stop     StopReason
	usage    Usage
	reported bool
}

type chatChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Content          *string        `json:"content"`
			ReasoningContent *string        `json:"reasoning_content"`
			Refusal          *string        `json:"refusal"`
			ToolCalls        []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func newChatDecoder() *chatDecoder { return &chatDecoder{open: -1} }

func (d *chatDecoder) openBlock(out []StreamEvent, part PartType, id, name string) []StreamEvent {
	out = d.closeOpen(out)
	d.open, d.openPart = d.next, part
	d.next++
	return append(out, StreamEvent{Kind: EvBlockStart, Index: d.open, Part: part, ID: id, Name: name})
}

func (d *chatDecoder) closeOpen(out []StreamEvent) []StreamEvent {
	if d.open >= 0 {
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: d.open})
		d.open = -1
	}
	return out
}

func (d *chatDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	if ev.IsDone() {
		return d.finish(out), nil
	}
	if d.finished {
		return out, nil
	}
	var c chatChunk
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return out, fmt.Errorf("chat completions chunk: %w", err)
	}
	if c.Error != nil {
		d.finished = true
		return append(out, StreamEvent{Kind: EvError, ErrStatus: errStatus(c.Error.Type), Message: c.Error.Message}), nil
	}
	if !d.started {
		d.started = true
		out = append(out, StreamEvent{Kind: EvStart, ID: c.ID})
	}
	for _, ch := range c.Choices {
		dl := &ch.Delta
		if dl.ReasoningContent != nil && *dl.ReasoningContent != "" {
			if d.open < 0 || d.openPart != PartThinking {
				out = d.openBlock(out, PartThinking, "", "")
			}
			out = append(out, StreamEvent{Kind: EvDelta, Index: d.open, Text: *dl.ReasoningContent})
		}
		text := ""
		if dl.Content != nil {
			text = *dl.Content
		} else if dl.Refusal != nil {
			text = *dl.Refusal
		}
		if text != "" {
			if d.open < 0 || d.openPart != PartText {
				out = d.openBlock(out, PartText, "", "")
			}
			out = append(out, StreamEvent{Kind: EvDelta, Index: d.open, Text: text})
		}
		for _, tc := range dl.ToolCalls {
			k := 0
			if tc.Index != nil {
				k = *tc.Index
			}
			name, args := tc.function()
			idx, seen := d.tools[k]
			if !seen {
				if d.tools == nil {
					d.tools = map[int]int{}
				}
				out = d.openBlock(out, PartToolCall, tc.ID, name)
				idx = d.open
				d.tools[k] = idx
			}
			if args != "" {
				out = append(out, StreamEvent{Kind: EvDelta, Index: idx, Text: args})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.stop = stopFromChat(*ch.FinishReason)
			out = d.closeOpen(out)
		}
	}
	if c.Usage != nil {
		d.usage, d.reported = c.Usage.toUsage(), true
	}
	return out, nil
}

func (d *chatDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	if !d.started {
		out = append(out, StreamEvent{Kind: EvStart})
	}
	out = d.closeOpen(out)
	if d.stop == "" {
		return append(out, StreamEvent{Kind: EvError, ErrStatus: http.StatusBadGateway, Message: "upstream stream ended without a finish_reason"})
	}
	return append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, Usage: d.usage, UsageReported: d.reported})
}

// ---- streaming: encoder (neutral → chat client) ----

type chatEncoder struct {
	prefix       []byte // {"id":..,"object":..,"created":..,"model":..,"choices":
	includeUsage bool
	started      bool
	finished     bool
	tools        map[int]int // neutral index → tool_calls index
	kinds        map[int]PartType
	// custom holds the calls of the client's freeform tools being
	// streamed: their input is inside the arguments of the function the
	// tool became, so each is sent whole when it is complete.
	custom map[int]*chatCustomPending
}

type chatCustomPending struct {
	id, name string
	args     []byte
}

func newChatEncoder(model string, includeUsage bool) *chatEncoder {
	p := make([]byte, 0, 128)
	p = append(p, `{"id":`...)
	p = appendJSONString(p, NewID("chatcmpl-"))
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = appendInt(p, time.Now().Unix())
	p = append(p, `,"model":`...)
	p = appendJSONString(p, model)
	p = append(p, `,"choices":`...)
	return &chatEncoder{prefix: p, includeUsage: includeUsage, tools: map[int]int{}, kinds: map[int]PartType{}}
}

// chunk returns prefix + [{"index":0,"delta":<delta>,"logprobs":null,"finish_reason":<fr>}] + }.
func (e *chatEncoder) chunk(out []Event, delta []byte, finish string) []Event {
	d := make([]byte, 0, len(e.prefix)+len(delta)+80)
	d = append(d, e.prefix...)
	d = append(d, `[{"index":0,"delta":`...)
	d = append(d, delta...)
	d = append(d, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		d = append(d, "null"...)
	} else {
		d = appendJSONString(d, finish)
	}
	d = append(d, "}]}"...)
	return append(out, Event{Data: d})
}

func (e *chatEncoder) encode(ev StreamEvent, out []Event) []Event {
	if e.finished {
		return out
	}
	if !e.started && ev.Kind != EvError {
		e.started = true
		out = e.chunk(out, []byte(`{"role":"assistant","content":""}`), "")
		if ev.Kind == EvStart {
			return out
		}
	}
	switch ev.Kind {
	case EvBlockStart:
		e.kinds[ev.Index] = ev.Part
		if ev.Part == PartToolCall {
			k := len(e.tools)
			e.tools[ev.Index] = k
			if ev.Custom {
				if e.custom == nil {
					e.custom = map[int]*chatCustomPending{}
				}
				e.custom[ev.Index] = &chatCustomPending{id: ev.ID, name: ev.Name}
				break
			}
			d := make([]byte, 0, 128)
			d = append(d, `{"tool_calls":[{"index":`...)
			d = appendInt(d, int64(k))
			d = append(d, `,"id":`...)
			d = appendJSONString(d, ev.ID)
			d = append(d, `,"type":"function","function":{"name":`...)
			d = appendJSONString(d, ev.Name)
			d = append(d, `,"arguments":""}}]}`...)
			out = e.chunk(out, d, "")
		}
	case EvDelta:
		if ev.Text == "" {
			return out
		}
		switch e.kinds[ev.Index] {
		case PartText:
			d := make([]byte, 0, 16+len(ev.Text))
			d = append(d, `{"content":`...)
			d = appendJSONString(d, ev.Text)
			d = append(d, '}')
			out = e.chunk(out, d, "")
		case PartToolCall:
			if c := e.custom[ev.Index]; c != nil {
				c.args = append(c.args, ev.Text...)
				break
			}
			d := make([]byte, 0, 64+len(ev.Text))
			d = append(d, `{"tool_calls":[{"index":`...)
			d = appendInt(d, int64(e.tools[ev.Index]))
			d = append(d, `,"function":{"arguments":`...)
			d = appendJSONString(d, ev.Text)
			d = append(d, `}}]}`...)
			out = e.chunk(out, d, "")
		}
	case EvBlockStop:
		out = e.flushCustom(out, ev.Index)
	case EvFinish:
		for _, idx := range slices.Sorted(maps.Keys(e.custom)) {
			out = e.flushCustom(out, idx)
		}
		e.finished = true
		out = e.chunk(out, []byte(`{}`), chatFinish(ev.Stop))
		if e.includeUsage {
			d := make([]byte, 0, len(e.prefix)+200)
			d = append(d, e.prefix...)
			d = append(d, `[],"usage":`...)
			d = appendChatUsage(d, ev.Usage)
			d = append(d, '}')
			out = append(out, Event{Data: d})
		}
		out = append(out, DoneEvent)
	case EvError:
		e.finished = true
		out = append(out, Event{Data: openAIErrorBody(apierr.OpenAIType(ev.ErrStatus), ev.Message)})
	}
	return out
}

// flushCustom sends a complete call of a freeform tool.
func (e *chatEncoder) flushCustom(out []Event, idx int) []Event {
	c := e.custom[idx]
	if c == nil {
		return out
	}
	delete(e.custom, idx)
	input := customInput(string(c.args))
	d := make([]byte, 0, 128+len(input))
	d = append(d, `{"tool_calls":[{"index":`...)
	d = appendInt(d, int64(e.tools[idx]))
	d = append(d, `,"id":`...)
	d = appendJSONString(d, c.id)
	d = append(d, `,"type":"custom","custom":{"name":`...)
	d = appendJSONString(d, c.name)
	d = append(d, `,"input":`...)
	d = appendJSONString(d, input)
	d = append(d, `}}]}`...)
	return e.chunk(out, d, "")
}

func openAIErrorBody(typ, msg string) []byte {
	d := make([]byte, 0, 80+len(msg))
	d = append(d, `{"error":{"message":`...)
	d = appendJSONString(d, msg)
	d = append(d, `,"type":`...)
	d = appendJSONString(d, typ)
	return append(d, `,"param":null,"code":null}}`...)
}
