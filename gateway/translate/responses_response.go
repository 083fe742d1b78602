package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Codec of the responses protocol (OpenAI Responses API wire format):
// complete responses and usage.

type responsesUsage struct {
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

type responsesResponse struct {
	ID                string                      `json:"id"`
	Object            string                      `json:"object"`
	CreatedAt         int64                       `json:"created_at"`
	Status            string                      `json:"status"`
	Error             json.RawMessage             `json:"error"`
	IncompleteDetails *responsesIncompleteDetails `json:"incomplete_details"`
	Model             string                      `json:"model"`
	Output            []responsesItem             `json:"output"`
	Usage             *responsesUsage             `json:"usage"`
}

type responsesIncompleteDetails struct {
	Reason string `json:"reason"`
}

func (u *responsesUsage) toUsage() Usage {
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

func decodeResponsesResponse(body []byte) (*Response, error) {
	var in responsesResponse
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
			if t := responsesTextOf(it.Content); t != "" {
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

func stopFromResponses(status string, inc *responsesIncompleteDetails, parts []Part) StopReason {
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

// encodeResponsesResponse renders r; signer is the upstream protocol whose
// thinking signatures r carries (see encodeReasoning).
func encodeResponsesResponse(r *Response, signer Protocol) ([]byte, error) {
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
		items = append(items, encodeResponsesItem(p, "", "completed", signer))
	}
	status, inc := responsesStatus(r.Stop)
	return responsesObject(id, created, r.Model, status, inc, items, &r.Usage, nil), nil
}

// encodeResponsesItem renders one output item of a finished part; id is the
// item's ID (generated when empty), signer as for encodeResponsesResponse.
func encodeResponsesItem(p Part, id, status string, signer Protocol) []byte {
	d := make([]byte, 0, 128+len(p.Text)+len(p.Arguments)+len(p.Input))
	switch p.Type {
	case PartToolCall:
		if p.Custom {
			if id == "" {
				id = NewID("ctc_")
			}
			d = append(d, `{"type":"custom_tool_call","id":`...)
			d = appendJSONString(d, id)
			d = append(d, `,"call_id":`...)
			d = appendJSONString(d, p.ID)
			d = appendNamespace(d, p.Namespace)
			d = append(d, `,"name":`...)
			d = appendJSONString(d, p.Name)
			d = append(d, `,"input":`...)
			d = appendJSONString(d, p.Input)
			return append(d, '}')
		}
		if id == "" {
			id = NewID("fc_")
		}
		d = append(d, `{"type":"function_call","id":`...)
		d = appendJSONString(d, id)
		d = append(d, `,"call_id":`...)
		d = appendJSONString(d, p.ID)
		d = appendNamespace(d, p.Namespace)
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
		d = append(d, ']')
		if enc := encodeReasoning(p, signer); enc != "" {
			d = append(d, `,"encrypted_content":`...)
			d = appendJSONString(d, enc)
		}
		return append(d, '}')
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

// appendNamespace adds a tool call's "namespace" member when it has one.
func appendNamespace(d []byte, ns string) []byte {
	if ns == "" {
		return d
	}
	d = append(d, `,"namespace":`...)
	return appendJSONString(d, ns)
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
	var u responsesUsage
	if json.Unmarshal(raw, &u) != nil {
		return Usage{}, false
	}
	return u.toUsage(), true
}
