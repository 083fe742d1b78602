package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Codec of the bedrock protocol (Amazon Bedrock ConverseStream): streams.
// The wire is the AWS event stream (binary frames); the bedrock provider
// turns each frame into an Event named after its :event-type header with
// the frame's JSON payload as Data, and an exception frame into an "error"
// event {"error":{"type","message"}}. The sequence is messageStart, per
// block contentBlockStart (tool use only) contentBlockDelta*
// contentBlockStop, messageStop (the stop reason), then metadata (the
// usage): the usage comes after the stop, so the neutral finish waits for
// it.

// ---- streaming: decoder (bedrock upstream → neutral) ----

type bedrockDecoder struct {
	started  bool
	stopped  bool // messageStop seen
	finished bool
	stop     StopReason
	usage    Usage
	reported bool
	next     int          // the next neutral block index
	blocks   map[int]int  // open blocks: Bedrock index → neutral index
	ignored  map[int]bool // Bedrock indexes of ignored blocks
	buf      struct {
		ContentBlockIndex int `json:"contentBlockIndex"`
		Start             *struct {
			ToolUse *struct {
				ToolUseID string `json:"toolUseId"`
				Name      string `json:"name"`
			} `json:"toolUse"`
		} `json:"start"`
		Delta *struct {
			Text    *string `json:"text"`
			ToolUse *struct {
				Input string `json:"input"`
			} `json:"toolUse"`
			ReasoningContent *struct {
				Text            *string `json:"text"`
				Signature       string  `json:"signature"`
				RedactedContent string  `json:"redactedContent"`
			} `json:"reasoningContent"`
		} `json:"delta"`
		StopReason string        `json:"stopReason"`
		Usage      *bedrockUsage `json:"usage"`
		Error      *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (d *bedrockDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	if d.finished {
		return out, nil
	}
	b := &d.buf
	b.ContentBlockIndex, b.Start, b.Delta, b.StopReason, b.Usage, b.Error = 0, nil, nil, "", nil, nil
	if err := json.Unmarshal(ev.Data, b); err != nil {
		return out, fmt.Errorf("bedrock stream event %s: %w", ev.Name, err)
	}
	if ev.Name == "error" {
		d.finished = true
		e := StreamEvent{Kind: EvError, ErrStatus: http.StatusInternalServerError}
		if b.Error != nil {
			e.ErrStatus, e.Message = errStatus(b.Error.Type), b.Error.Message
		}
		return append(out, e), nil
	}
	if !d.started {
		d.started = true
		d.blocks, d.ignored = map[int]int{}, map[int]bool{}
		out = append(out, StreamEvent{Kind: EvStart})
	}
	switch ev.Name {
	case "contentBlockStart":
		if b.Start != nil && b.Start.ToolUse != nil {
			out = d.open(out, b.ContentBlockIndex, PartToolCall, b.Start.ToolUse.ToolUseID, b.Start.ToolUse.Name)
		}
	case "contentBlockDelta":
		out = d.delta(out, b.ContentBlockIndex)
	case "contentBlockStop":
		if i, ok := d.blocks[b.ContentBlockIndex]; ok {
			delete(d.blocks, b.ContentBlockIndex)
			out = append(out, StreamEvent{Kind: EvBlockStop, Index: i})
		}
	case "messageStop":
		d.stopped, d.stop = true, stopFromBedrock(b.StopReason)
	case "metadata":
		if b.Usage != nil {
			d.usage, d.reported = b.Usage.toUsage(), true
		}
		if d.stopped {
			out = d.finishWith(out)
		}
	}
	return out, nil
}

func (d *bedrockDecoder) open(out []StreamEvent, idx int, kind PartType, id, name string) []StreamEvent {
	if _, ok := d.blocks[idx]; ok {
		return out
	}
	d.blocks[idx] = d.next
	d.next++
	return append(out, StreamEvent{Kind: EvBlockStart, Index: d.blocks[idx], Part: kind, ID: id, Name: name})
}

// delta handles a contentBlockDelta. Text and reasoning blocks have no
// contentBlockStart: their first delta opens them.
func (d *bedrockDecoder) delta(out []StreamEvent, idx int) []StreamEvent {
	dl := d.buf.Delta
	if dl == nil || d.ignored[idx] {
		return out
	}
	var text string
	switch {
	case dl.Text != nil:
		out, text = d.open(out, idx, PartText, "", ""), *dl.Text
	case dl.ToolUse != nil:
		out, text = d.open(out, idx, PartToolCall, "", ""), dl.ToolUse.Input
	case dl.ReasoningContent != nil && dl.ReasoningContent.Text != nil:
		out, text = d.open(out, idx, PartThinking, "", ""), *dl.ReasoningContent.Text
	case dl.ReasoningContent != nil && dl.ReasoningContent.RedactedContent != "":
		if _, ok := d.blocks[idx]; !ok {
			d.ignored[idx] = true // redacted reasoning: no client protocol has it
		}
		return out
	default:
		return out // a signature, or a member this codec does not know
	}
	if text == "" {
		return out
	}
	return append(out, StreamEvent{Kind: EvDelta, Index: d.blocks[idx], Text: text})
}

func (d *bedrockDecoder) finishWith(out []StreamEvent) []StreamEvent {
	for bi, i := range d.blocks {
		delete(d.blocks, bi)
		out = append(out, StreamEvent{Kind: EvBlockStop, Index: i})
	}
	d.finished = true
	return append(out, StreamEvent{Kind: EvFinish, Stop: d.stop, Usage: d.usage, UsageReported: d.reported})
}

// finish closes a stream at the upstream's end: one that stopped but sent
// no metadata still ends well-formed (its usage estimated); one that never
// stopped ends with an error.
func (d *bedrockDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	if d.stopped {
		return d.finishWith(out)
	}
	d.finished = true
	return append(out, StreamEvent{Kind: EvError, ErrStatus: http.StatusBadGateway, Message: "upstream stream ended before messageStop"})
}

// ---- streaming: encoder (neutral → bedrock) ----

// bedrockEncoder renders neutral events as ConverseStream events (the
// provider's SSE view of them). The gateway uses it to replay a complete
// Converse answer sent to a stream request, and tests to script streams.
type bedrockEncoder struct {
	kinds map[int]PartType
}

func newBedrockEncoder() *bedrockEncoder { return &bedrockEncoder{kinds: map[int]PartType{}} }

func bedrockEvent(out []Event, name string, v any) []Event {
	b, _ := json.Marshal(v)
	return append(out, Event{Name: name, Data: b})
}

func (e *bedrockEncoder) encode(ev StreamEvent, out []Event) []Event {
	switch ev.Kind {
	case EvStart:
		out = bedrockEvent(out, "messageStart", map[string]any{"role": "assistant"})
	case EvBlockStart:
		e.kinds[ev.Index] = ev.Part
		if ev.Part == PartToolCall {
			out = bedrockEvent(out, "contentBlockStart", map[string]any{"contentBlockIndex": ev.Index,
				"start": map[string]any{"toolUse": map[string]any{"toolUseId": ev.ID, "name": ev.Name}}})
		}
	case EvDelta:
		var delta map[string]any
		switch e.kinds[ev.Index] {
		case PartToolCall:
			delta = map[string]any{"toolUse": map[string]any{"input": ev.Text}}
		case PartThinking:
			delta = map[string]any{"reasoningContent": map[string]any{"text": ev.Text}}
			if ev.Signature != "" {
				delta = map[string]any{"reasoningContent": map[string]any{"signature": ev.Signature}}
			}
		default:
			delta = map[string]any{"text": ev.Text}
		}
		out = bedrockEvent(out, "contentBlockDelta", map[string]any{"contentBlockIndex": ev.Index, "delta": delta})
	case EvBlockStop:
		out = bedrockEvent(out, "contentBlockStop", map[string]any{"contentBlockIndex": ev.Index})
	case EvFinish:
		out = bedrockEvent(out, "messageStop", map[string]any{"stopReason": bedrockStopReason(ev.Stop)})
		out = bedrockEvent(out, "metadata", map[string]any{"usage": newBedrockUsage(ev.Usage), "metrics": map[string]any{"latencyMs": 0}})
	case EvError:
		typ := "internalServerException"
		if ev.ErrStatus == http.StatusTooManyRequests {
			typ = "throttlingException"
		}
		out = bedrockEvent(out, "error", map[string]any{"error": map[string]any{"type": BedrockErrorType(typ), "message": ev.Message}})
	}
	return out
}

// BedrockErrorType is the error type (of the anthropic and openai families'
// tables) that a Bedrock exception name stands for, so that the gateway
// classifies an exception frame like an error event of the other
// protocols: throttling and quota are rate limits, unavailability an
// overload, validation and access the request's or the credential's
// fault, anything else (modelStreamErrorException, internalServerException,
// modelTimeoutException) a server error.
func BedrockErrorType(exception string) string {
	e := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(exception, "Exception"), "exception"))
	switch e {
	case "throttling", "servicequotaexceeded", "modelnotready":
		return "rate_limit_error"
	case "serviceunavailable":
		return "overloaded_error"
	case "validation":
		return "invalid_request_error"
	case "accessdenied":
		return "permission_error"
	case "resourcenotfound":
		return "not_found_error"
	}
	return "api_error"
}
