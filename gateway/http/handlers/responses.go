package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/store"
)

// StoredResponses serves GET and DELETE /v1/responses/{id}: the stored
// responses of the key's tenant, in the OpenAI Responses wire format. A
// response of another tenant, an unknown one and one past its retention
// are the same 404, as the public API answers for an ID the caller cannot
// see.
type StoredResponses struct{ Ledger ResponseStore }

func registerResponses(mux Mux, keys Authenticator, h *StoredResponses) {
	// Authentication failures answer as POST /v1/responses does.
	fail := responsesProtocol().fail
	authFail := func(w http.ResponseWriter, status int, message string) { fail(w, status, "invalid_api_key", message) }
	mux.Handle("GET /v1/responses/{id}", authenticated(keys, false, authFail, h.Get))
	mux.Handle("DELETE /v1/responses/{id}", authenticated(keys, false, authFail, h.Delete))
}

// Get returns the response object as the client received it.
func (h *StoredResponses) Get(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("id")
	state, err := h.Ledger.LoadResponse(r.Context(), id, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		responseNotFound(w, id)
		return
	}
	if err != nil {
		log.FromContext(r.Context()).Error(err, "load stored response", "response", id)
		openAIFail(w, http.StatusServiceUnavailable, "", "the response could not be loaded; retry")
		return
	}
	var conv conversation
	if err := json.Unmarshal(state, &conv); err != nil || len(conv.Response) == 0 {
		// Saved before the object itself was kept: what is known of it.
		body, _ := json.Marshal(map[string]any{"id": id, "object": "response", "status": "completed", "output": conv.Output})
		conv.Response = body
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(conv.Response)
}

// Delete removes the stored response; a later previous_response_id naming
// it fails as for an unknown ID.
func (h *StoredResponses) Delete(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("id")
	err := h.Ledger.DeleteResponse(r.Context(), id, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		responseNotFound(w, id)
		return
	}
	if err != nil {
		log.FromContext(r.Context()).Error(err, "delete stored response", "response", id)
		openAIFail(w, http.StatusServiceUnavailable, "", "the response could not be deleted; retry")
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response", true})
}

// responseNotFound is the public API's answer, whose 404 carries the type
// invalid_request_error (not the not_found_error the status maps to).
func responseNotFound(w http.ResponseWriter, id string) {
	apierr.OpenAI(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Response with id '%s' not found.", id))
}
