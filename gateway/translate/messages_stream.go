package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/gateway/apierr"
)

// Codec of the messages protocol (Anthropic Messages API wire format):
// streams.

// ---- streaming: decoder (messages upstream → neutral) ----

type messagesDecoder struct {
	usage    Usage
	stop     StopReason
	stopSeq  string
	reported bool
	started  bool
	finished bool
	ignored  map[int]bool
	buf      struct {
		Type    string            `json:"type"`
		Index   int               `json:"index"`
		Message *messagesResponse `json:"message"`
		Block   *struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			Name     string `json:"name"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
			Data     string `json:"data"`
		} `json:"content_block"`
		Delta *struct {
			Type         string  `json:"type"`
			Text         string  `json:"text"`
			PartialJSON  string  `json:"partial_json"`
			Thinking     string  `json:"thinking"`
			Signature    string  `json:"signature"`
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage *messagesUsage `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (d *messagesDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	b := &d.buf
	b.Message, b.Block, b.Delta, b.Usage, b.Error, b.Index = nil, nil, nil, nil, nil, 0
	if err := json.Unmarshal(ev.Data, b); err != nil {
		return out, fmt.Errorf("messages stream event: %w", err)
	}
	switch b.Type {
	case "message_start":
		d.started = true
		e := StreamEvent{Kind: EvStart}
		if b.Message != nil {
			e.ID = b.Message.ID
			d.usage = b.Message.Usage.toUsage()
			e.Usage = d.usage
		}
		out = append(out, e)
	case "content_block_start":
		if b.Block == nil {
			break
		}
		switch b.Block.Type {
		case "text":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartText})
			if b.Block.Text != "" {
				out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Block.Text})
			}
		case "tool_use":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartToolCall, ID: b.Block.ID, Name: b.Block.Name})
		case "thinking":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartThinking})
		case "redacted_thinking":
			out = append(out, StreamEvent{Kind: EvBlockStart, Index: b.Index, Part: PartThinking, Redacted: b.Block.Data})
		default:
			if d.ignored == nil {
				d.ignored = map[int]bool{}
			}
			d.ignored[b.Index] = true // server tool blocks etc. have no equivalent
		}
	case "content_block_delta":
		if b.Delta == nil || d.ignored[b.Index] {
			break
		}
		switch b.Delta.Type {
		case "text_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.Text})
		case "input_json_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.PartialJSON})
		case "thinking_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Text: b.Delta.Thinking})
		case "signature_delta":
			out = append(out, StreamEvent{Kind: EvDelta, Index: b.Index, Signature: b.Delta.Signature})
		}
	case "content_block_stop":
		if d.ignored[b.Index] {
			break
		}
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: b.Index})
	case "message_delta":
		if b.Delta != nil && b.Delta.StopReason != nil {
			d.stop = stopFromMessages(*b.Delta.StopReason)
		}
		if b.Delta != nil && b.Delta.StopSequence != nil {
			d.stopSeq = *b.Delta.StopSequence
		}
		if u := b.Usage; u != nil {
			d.reported = true
			d.usage.OutputTokens = u.OutputTokens
			if u.InputTokens > 0 {
				d.usage.InputTokens = u.InputTokens
			}
			if u.CacheReadInputTokens != nil {
				d.usage.CacheReadTokens = u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens != nil {
				d.usage.CacheWriteTokens = u.CacheCreationInputTokens
			}
		}
	case "message_stop":
		d.finished = true
		out = append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, StopSequence: d.stopSeq, Usage: d.usage, UsageReported: d.reported})
	case "error":
		e := StreamEvent{Kind: EvError, ErrStatus: http.StatusInternalServerError}
		if b.Error != nil {
			e.ErrStatus, e.Message = errStatus(b.Error.Type), b.Error.Message
		}
		d.finished = true
		out = append(out, e)
	}
	return out, nil
}

func (d *messagesDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	if d.stop != "" {
		return append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, StopSequence: d.stopSeq, Usage: d.usage, UsageReported: d.reported})
	}
	return append(out, StreamEvent{Kind: EvError, ErrStatus: http.StatusBadGateway, Message: "upstream stream ended before message_stop"})
}

// ---- streaming: encoder (neutral → messages client) ----

type messagesEncoder struct {
	model    string
	id       string
	started  bool
	finished bool
	next     int
	open     map[int]openBlock // neutral index → our block
}

type openBlock struct {
	index int
	part  PartType
}

func newMessagesEncoder(model string) *messagesEncoder {
	return &messagesEncoder{model: model, open: map[int]openBlock{}}
}

func (e *messagesEncoder) event(out []Event, name string, data []byte) []Event {
	return append(out, Event{Name: name, Data: data})
}

func (e *messagesEncoder) start(out []Event, id string) []Event {
	e.started = true
	e.id = id
	if !strings.HasPrefix(e.id, "msg_") {
		e.id = NewID("msg_")
	}
	d := make([]byte, 0, 256)
	d = append(d, `{"type":"message_start","message":{"id":`...)
	d = appendJSONString(d, e.id)
	d = append(d, `,"type":"message","role":"assistant","content":[],"model":`...)
	d = appendJSONString(d, e.model)
	d = append(d, `,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`...)
	return e.event(out, "message_start", d)
}

func (e *messagesEncoder) encode(ev StreamEvent, out []Event) []Event {
	if e.finished {
		return out
	}
	if !e.started && ev.Kind != EvError {
		out = e.start(out, ev.ID)
		if ev.Kind == EvStart {
			return out
		}
	}
	switch ev.Kind {
	case EvBlockStart:
		b := openBlock{index: e.next, part: ev.Part}
		e.next++
		e.open[ev.Index] = b
		d := make([]byte, 0, 128)
		d = append(d, `{"type":"content_block_start","index":`...)
		d = appendInt(d, int64(b.index))
		switch ev.Part {
		case PartToolCall:
			d = append(d, `,"content_block":{"type":"tool_use","id":`...)
			d = appendJSONString(d, ev.ID)
			d = append(d, `,"name":`...)
			d = appendJSONString(d, ev.Name)
			d = append(d, `,"input":{}}}`...)
		case PartThinking:
			if ev.Redacted != "" {
				d = append(d, `,"content_block":{"type":"redacted_thinking","data":`...)
				d = appendJSONString(d, ev.Redacted)
				d = append(d, "}}"...)
				break
			}
			d = append(d, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
		default:
			d = append(d, `,"content_block":{"type":"text","text":""}}`...)
		}
		out = e.event(out, "content_block_start", d)
	case EvDelta:
		b, ok := e.open[ev.Index]
		if !ok {
			return out
		}
		if ev.Signature != "" && b.part == PartThinking {
			d := make([]byte, 0, 96+len(ev.Signature))
			d = append(d, `{"type":"content_block_delta","index":`...)
			d = appendInt(d, int64(b.index))
			d = append(d, `,"delta":{"type":"signature_delta","signature":`...)
			d = appendJSONString(d, ev.Signature)
			d = append(d, "}}"...)
			return e.event(out, "content_block_delta", d)
		}
		if ev.Text == "" {
			return out
		}
		d := make([]byte, 0, 96+len(ev.Text))
		d = append(d, `{"type":"content_block_delta","index":`...)
		d = appendInt(d, int64(b.index))
		switch b.part {
		case PartToolCall:
			d = append(d, `,"delta":{"type":"input_json_delta","partial_json":`...)
		case PartThinking:
			d = append(d, `,"delta":{"type":"thinking_delta","thinking":`...)
		default:
			d = append(d, `,"delta":{"type":"text_delta","text":`...)
		}
		d = appendJSONString(d, ev.Text)
		d = append(d, "}}"...)
		out = e.event(out, "content_block_delta", d)
	case EvBlockStop:
		out = e.stopBlock(out, ev.Index)
	case EvFinish:
		out = e.closeAll(out)
		stop := ev.Stop
		if stop == "" {
			stop = StopEndTurn
		}
		d := make([]byte, 0, 192)
		d = append(d, `{"type":"message_delta","delta":{"stop_reason":`...)
		d = appendJSONString(d, string(stop))
		d = append(d, `,"stop_sequence":`...)
		if ev.StopSequence != "" {
			d = appendJSONString(d, ev.StopSequence)
		} else {
			d = append(d, "null"...)
		}
		d = append(d, `},"usage":{"input_tokens":`...)
		d = appendInt(d, ev.Usage.InputTokens)
		if ev.Usage.CacheWriteTokens != nil {
			d = append(d, `,"cache_creation_input_tokens":`...)
			d = appendInt(d, *ev.Usage.CacheWriteTokens)
		}
		if ev.Usage.CacheReadTokens != nil {
			d = append(d, `,"cache_read_input_tokens":`...)
			d = appendInt(d, *ev.Usage.CacheReadTokens)
		}
		d = append(d, `,"output_tokens":`...)
		d = appendInt(d, ev.Usage.OutputTokens)
		d = append(d, "}}"...)
		out = e.event(out, "message_delta", d)
		out = e.event(out, "message_stop", []byte(`{"type":"message_stop"}`))
		e.finished = true
	case EvError:
		out = e.event(out, "error", messagesErrorBody(apierr.MessagesType(ev.ErrStatus), ev.Message))
		e.finished = true
	}
	return out
}

func (e *messagesEncoder) stopBlock(out []Event, idx int) []Event {
	b, ok := e.open[idx]
	if !ok {
		return out
	}
	delete(e.open, idx)
	d := make([]byte, 0, 48)
	d = append(d, `{"type":"content_block_stop","index":`...)
	d = appendInt(d, int64(b.index))
	d = append(d, '}')
	return e.event(out, "content_block_stop", d)
}

func (e *messagesEncoder) closeAll(out []Event) []Event {
	for len(e.open) > 0 {
		lowest := -1
		for k, b := range e.open {
			if lowest < 0 || b.index < e.open[lowest].index {
				lowest = k
			}
		}
		out = e.stopBlock(out, lowest)
	}
	return out
}

func messagesErrorBody(typ, msg string) []byte {
	d := make([]byte, 0, 64+len(msg))
	d = append(d, `{"type":"error","error":{"type":`...)
	d = appendJSONString(d, typ)
	d = append(d, `,"message":`...)
	d = appendJSONString(d, msg)
	return append(d, "}}"...)
}
