package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// conversation is the server-side state of the responses protocol: the
// input items of a request (its previous turns included) and, once
// answered, the output items. A later request names it by the response ID
// in previous_response_id; the upstream never sees our IDs, it gets the
// whole conversation as input. Response is the response object as the
// client received it, which GET /v1/responses/{id} returns.
type conversation struct {
	Input    []json.RawMessage `json:"input"`
	Output   []json.RawMessage `json:"output"`
	Response json.RawMessage   `json:"response,omitempty"`
	store    bool
}

// expandConversation replaces previous_response_id with the conversation it
// names. It returns the body to send, the conversation to save after the
// answer, and a client error message.
func (t *Text) expandConversation(ctx context.Context, p *auth.Principal, body []byte) ([]byte, *conversation, string) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return body, nil, "the request body is not valid JSON"
	}
	conv := &conversation{store: true}
	if raw, ok := f["store"]; ok {
		_ = json.Unmarshal(raw, &conv.store)
	}
	input, inputErr := inputItems(f["input"])
	prevRaw, hasPrev := f["previous_response_id"]
	var prevID string
	if hasPrev {
		_ = json.Unmarshal(prevRaw, &prevID)
	}
	if prevID == "" {
		// Nothing to expand: the body goes as sent, and the upstream judges
		// an input it cannot read (the conversation keeps what was read).
		conv.Input = input
		return body, conv, ""
	}
	if inputErr != nil {
		return body, nil, "input: must be a string or an array of input items to continue a previous response"
	}
	state, err := t.Ledger.LoadResponse(ctx, prevID, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return body, nil, fmt.Sprintf("Previous response with id '%s' not found.", prevID)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "load conversation")
		return body, nil, "the previous response could not be loaded; retry"
	}
	var prev struct {
		Input  []json.RawMessage `json:"input"`
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(state, &prev); err != nil {
		return body, nil, "the previous response could not be loaded"
	}
	conv.Input = append(append(append([]json.RawMessage{}, prev.Input...), prev.Output...), input...)
	delete(f, "previous_response_id")
	if f["input"], err = json.Marshal(conv.Input); err != nil {
		return body, nil, "could not build the conversation"
	}
	out, err := json.Marshal(f)
	if err != nil {
		return body, nil, "could not build the conversation"
	}
	return out, conv, ""
}

// inputItems turns the input parameter into items: a string is one user
// message; no input, no items.
func inputItems(raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		msg, err := json.Marshal(map[string]string{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{msg}, err
	}
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	return items, err
}

// completedResponse reads the ID and output items of a response object.
func completedResponse(resp []byte) (string, []json.RawMessage) {
	var r struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
	}
	if json.Unmarshal(resp, &r) != nil {
		return "", nil
	}
	return r.ID, r.Output
}

// streamCapture remembers the response of a responses stream's
// response.completed event.
type streamCapture struct{ response []byte }

func (c *streamCapture) observe(ev upstream.Event) {
	if ev.Name != "response.completed" && ev.Name != "" {
		return
	}
	var e struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(ev.Data, &e) == nil && e.Type == "response.completed" {
		c.response = append([]byte(nil), e.Response...)
	}
}

// saveConversation stores the answered turn under the response's ID.
func (t *Text) saveConversation(ctx context.Context, p *auth.Principal, model string, conv *conversation, response []byte) {
	if conv == nil || !conv.store || response == nil {
		return
	}
	id, output := completedResponse(response)
	if id == "" {
		return
	}
	conv.Output = output
	conv.Response = response
	state, err := json.Marshal(conv)
	if err == nil {
		err = t.Ledger.SaveResponse(ctx, id, p.UserID, model, state)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "save conversation", "response", id)
	}
}
