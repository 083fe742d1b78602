package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Codec of the gemini protocol (Google Gemini API streamGenerateContent with
// alt=sse): streams. Each event is a data line holding one
// GenerateContentResponse; text arrives in pieces, a function call whole.
// There is no terminal event: the chunk with a finishReason (and the final
// usageMetadata) is the last.

// ---- streaming: decoder (gemini upstream → neutral) ----

type geminiDecoder struct {
	usage    Usage
	reported bool
	started  bool
	finished bool
	open     bool     // a text or thinking block is open
	openPart PartType // its kind
	index    int      // the index of the open block, or of the next
	calls    bool     // a function call was seen
	buf      struct {
		geminiResponse
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
}

func (d *geminiDecoder) decode(ev Event, out []StreamEvent) ([]StreamEvent, error) {
	if d.finished {
		return out, nil
	}
	b := &d.buf
	// nil, not [:0]: decoding into reused elements would merge the
	// previous chunk's fields (a finishReason) into this one.
	b.Candidates, b.PromptFeedback, b.UsageMetadata, b.Error = nil, nil, nil, nil
	if err := json.Unmarshal(ev.Data, b); err != nil {
		return out, fmt.Errorf("gemini stream event: %w", err)
	}
	if b.Error != nil {
		d.finished = true
		status := b.Error.Code
		if status < 400 {
			status = http.StatusInternalServerError
		}
		return append(out, StreamEvent{Kind: EvError, ErrStatus: status, Message: b.Error.Message}), nil
	}
	if b.UsageMetadata != nil {
		// Every chunk carries the usage so far; the last one is final.
		d.usage, d.reported = b.UsageMetadata.toUsage(), true
	}
	if !d.started {
		d.started = true
		out = append(out, StreamEvent{Kind: EvStart, ID: b.ResponseID, Usage: Usage{InputTokens: d.usage.InputTokens, CacheReadTokens: d.usage.CacheReadTokens}})
	}
	if len(b.Candidates) == 0 {
		if b.PromptFeedback != nil && b.PromptFeedback.BlockReason != "" {
			out = d.closeOpen(out)
			d.finished = true
			out = append(out, StreamEvent{Kind: EvFinish, Stop: StopContentFilter, Usage: d.usage, UsageReported: d.reported})
		}
		return out, nil
	}
	c := &b.Candidates[0]
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				out = d.closeOpen(out)
				d.calls = true
				id := p.FunctionCall.ID
				if id == "" {
					id = NewID("call_")
				}
				out = append(out,
					StreamEvent{Kind: EvBlockStart, Index: d.index, Part: PartToolCall, ID: id, Name: p.FunctionCall.Name},
					StreamEvent{Kind: EvDelta, Index: d.index, Text: string(validJSONOr(string(p.FunctionCall.Args), "{}"))},
					StreamEvent{Kind: EvBlockStop, Index: d.index})
				d.index++
			case p.Text != nil:
				kind := PartText
				if p.Thought {
					kind = PartThinking
				}
				if d.open && d.openPart != kind {
					out = d.closeOpen(out)
				}
				if !d.open {
					d.open, d.openPart = true, kind
					out = append(out, StreamEvent{Kind: EvBlockStart, Index: d.index, Part: kind})
				}
				if *p.Text != "" {
					out = append(out, StreamEvent{Kind: EvDelta, Index: d.index, Text: *p.Text})
				}
			}
		}
	}
	if c.FinishReason != "" {
		out = d.closeOpen(out)
		d.finished = true
		out = append(out, StreamEvent{Kind: EvFinish, Stop: stopFromGemini(c.FinishReason, d.calls), Usage: d.usage, UsageReported: d.reported})
	}
	return out, nil
}

func (d *geminiDecoder) closeOpen(out []StreamEvent) []StreamEvent {
	if !d.open {
		return out
	}
	d.open = false
	out = append(out, StreamEvent{Kind: EvBlockStop, Index: d.index})
	d.index++
	return out
}

func (d *geminiDecoder) finish(out []StreamEvent) []StreamEvent {
	if d.finished {
		return out
	}
	d.finished = true
	return append(out, StreamEvent{Kind: EvError, ErrStatus: http.StatusBadGateway, Message: "upstream stream ended before a finishReason"})
}

// ---- streaming: encoder (neutral → gemini) ----

// geminiEncoder renders neutral events as Gemini chunks. The gateway uses it
// only to replay a complete Gemini answer (sent to a stream request) as a
// stream, so it favours simplicity: one chunk per text delta, a function
// call in one chunk when its block stops.
type geminiEncoder struct {
	id    string
	calls map[int]*geminiFunctionCall
	args  map[int]*strings.Builder
	kinds map[int]PartType
}

func newGeminiEncoder() *geminiEncoder {
	return &geminiEncoder{calls: map[int]*geminiFunctionCall{}, args: map[int]*strings.Builder{}, kinds: map[int]PartType{}}
}

func (e *geminiEncoder) chunk(out []Event, r geminiResponse) []Event {
	r.ResponseID = e.id
	b, _ := json.Marshal(r)
	return append(out, Event{Data: b})
}

func (e *geminiEncoder) encode(ev StreamEvent, out []Event) []Event {
	switch ev.Kind {
	case EvStart:
		e.id = ev.ID
	case EvBlockStart:
		e.kinds[ev.Index] = ev.Part
		if ev.Part == PartToolCall {
			e.calls[ev.Index] = &geminiFunctionCall{ID: ev.ID, Name: ev.Name}
			e.args[ev.Index] = &strings.Builder{}
		}
	case EvDelta:
		if a := e.args[ev.Index]; a != nil {
			a.WriteString(ev.Text)
			break
		}
		if ev.Text == "" {
			break // a thinking signature: Gemini's thoughts have none
		}
		t := ev.Text
		p := geminiPart{Text: &t, Thought: e.kinds[ev.Index] == PartThinking}
		out = e.chunk(out, geminiResponse{Candidates: []geminiCandidate{{Content: &geminiContent{Role: "model", Parts: []geminiPart{p}}}}})
	case EvBlockStop:
		if c := e.calls[ev.Index]; c != nil {
			c.Args = validJSONOr(e.args[ev.Index].String(), "{}")
			out = e.chunk(out, geminiResponse{Candidates: []geminiCandidate{{Content: &geminiContent{Role: "model", Parts: []geminiPart{{FunctionCall: c}}}}}})
		}
	case EvFinish:
		out = e.chunk(out, geminiResponse{Candidates: []geminiCandidate{{Content: &geminiContent{Role: "model", Parts: []geminiPart{}}, FinishReason: geminiFinishReason(ev.Stop)}},
			UsageMetadata: newGeminiUsage(ev.Usage)})
	case EvError:
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": ev.ErrStatus, "message": ev.Message}})
		out = append(out, Event{Data: b})
	}
	return out
}
