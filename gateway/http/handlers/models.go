package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/routing"
)

// Models serves GET /v1/models.
type Models struct {
	// Router lists the routes the tenant sees.
	Router Routes
	// Prices returns the current price table.
	Prices func() *pricing.Table
}

// modelEntry is one model of the list: the contract's fields, plus the
// fields the Anthropic and OpenAI SDKs read (type, display_name,
// created_at), so that one list serves every client.
type modelEntry struct {
	ID                     string   `json:"id"`
	Object                 string   `json:"object"`
	Type                   string   `json:"type"`
	DisplayName            string   `json:"display_name"`
	Created                int64    `json:"created"`
	CreatedAt              string   `json:"created_at"`
	OwnedBy                string   `json:"owned_by"`
	SupportedEndpointTypes []string `json:"supported_endpoint_types"`
	// Lifecycle is Anthropic's lifecycle stage: a listed model is usable.
	Lifecycle string `json:"lifecycle"`
	// MaxTokens is the route's output cap, when it has one.
	MaxTokens int32 `json:"max_tokens,omitempty"`
}

// entryOf is a route's model entry.
func entryOf(rt *v1.ModelRoute) modelEntry {
	name := rt.Spec.DisplayName
	if name == "" {
		name = string(rt.Spec.Model)
	}
	created := rt.CreationTimestamp.UTC()
	return modelEntry{ID: string(rt.Spec.Model), Object: "model", Type: "model", DisplayName: name,
		Created: created.Unix(), CreatedAt: created.Format(time.RFC3339), OwnedBy: ownedBy(rt), SupportedEndpointTypes: endpointTypes(rt),
		Lifecycle: "active", MaxTokens: rt.Spec.MaxOutputTokens}
}

// modelTypes maps the type parameter to the model types it selects. Async
// task models (video, audio) appear only when selected or with "all".
var modelTypes = map[string][]v1.ModelType{
	"text":      {v1.ModelTypeText},
	"chat":      {v1.ModelTypeText},
	"image":     {v1.ModelTypeImage},
	"video":     {v1.ModelTypeVideo},
	"audio":     {v1.ModelTypeAudio},
	"embedding": {v1.ModelTypeEmbedding},
	"all":       {v1.ModelTypeText, v1.ModelTypeImage, v1.ModelTypeVideo, v1.ModelTypeAudio, v1.ModelTypeEmbedding},
}

// authFail answers an authentication failure in the common shape.
func (h *Models) authFail(w http.ResponseWriter, status int, message string) {
	apierr.Common(w, status, apierr.OpenAIType(status), message)
}

// List returns the models the key may use: allowed by its allow-list,
// served by a ready backend of one of its groups, and priced for that group,
// ordered by ID. Anthropic's paging (limit, after_id, before_id) applies
// when asked for; without limit the whole list comes in one page.
func (h *Models) List(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	q := r.URL.Query()
	typ := q.Get("type")
	if typ == "" {
		typ = "text"
	}
	types, ok := modelTypes[typ]
	if !ok {
		apierr.Common(w, http.StatusBadRequest, "invalid_request_error", "type must be one of text, chat, image, video, audio, embedding, all")
		return
	}
	pg, msg := parsePage(q)
	if msg != "" {
		apierr.Common(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	routes, ok := h.visible(w, r, p)
	if !ok {
		return
	}
	data := []modelEntry{}
	for _, rt := range routes {
		if slices.Contains(types, rt.Spec.Type) {
			data = append(data, entryOf(rt))
		}
	}
	data, more := pg.cut(data)
	out := map[string]any{"success": true, "object": "list", "data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(data) > 0 {
		out["first_id"], out["last_id"] = data[0].ID, data[len(data)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// Get returns one model the key may use (of any type), or 404.
func (h *Models) Get(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("id")
	routes, ok := h.visible(w, r, p)
	if !ok {
		return
	}
	for _, rt := range routes {
		if string(rt.Spec.Model) == id {
			writeJSON(w, http.StatusOK, entryOf(rt))
			return
		}
	}
	apierr.Common(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("model %q not found", id))
}

// visible lists the routes the key may use, or answers an error.
func (h *Models) visible(w http.ResponseWriter, r *http.Request, p *auth.Principal) ([]*v1.ModelRoute, bool) {
	routes, err := h.Router.Visible(r.Context(), p.Tenant.Namespace)
	if err != nil {
		apierr.Common(w, http.StatusInternalServerError, apierr.OpenAIType(http.StatusInternalServerError), "could not list models")
		return nil, false
	}
	out := routes[:0]
	for _, rt := range routes {
		if p.AllowsModel(string(rt.Spec.Model)) && h.usable(p, rt) {
			out = append(out, rt)
		}
	}
	return out, true
}

// page is Anthropic's paging of a list ordered by ID.
type page struct {
	limit           int // 0: no limit
	afterID, before string
}

func parsePage(q url.Values) (page, string) {
	pg := page{afterID: q.Get("after_id"), before: q.Get("before_id")}
	if pg.afterID != "" && pg.before != "" {
		return pg, "after_id and before_id cannot both be set"
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return pg, "limit must be an integer from 1 to 1000"
		}
		pg.limit = n
	}
	return pg, ""
}

// cut is the page of data (ordered by ID) and whether more follow it in
// the paging direction.
func (pg page) cut(data []modelEntry) ([]modelEntry, bool) {
	switch {
	case pg.afterID != "":
		i, _ := slices.BinarySearchFunc(data, pg.afterID, func(e modelEntry, id string) int { return strings.Compare(e.ID, id) })
		if i < len(data) && data[i].ID == pg.afterID {
			i++
		}
		data = data[i:]
	case pg.before != "":
		i, _ := slices.BinarySearchFunc(data, pg.before, func(e modelEntry, id string) int { return strings.Compare(e.ID, id) })
		data = data[:i]
		if pg.limit > 0 && len(data) > pg.limit {
			return data[len(data)-pg.limit:], true
		}
		return data, false
	}
	if pg.limit > 0 && len(data) > pg.limit {
		return data[:pg.limit], true
	}
	return data, false
}

// usable: some group of the key has a ready backend and a price.
func (h *Models) usable(p *auth.Principal, rt *v1.ModelRoute) bool {
	table := h.Prices()
	for _, g := range p.Groups() {
		if !routing.ServesGroup(rt, g) {
			continue
		}
		for _, rule := range table.Rules(p.Tenant.Namespace, string(rt.Spec.Model)) {
			if rule.Group() == g {
				return true
			}
		}
	}
	return false
}

func ownedBy(rt *v1.ModelRoute) string {
	if rt.Spec.OwnedBy != "" {
		return rt.Spec.OwnedBy
	}
	return "modelgate"
}

// endpointTypes are the route's declared protocols, or every protocol its
// type is served on.
func endpointTypes(rt *v1.ModelRoute) []string {
	eps := rt.Spec.EndpointTypes
	if len(eps) == 0 {
		switch rt.Spec.Type {
		case v1.ModelTypeText:
			eps = []v1.EndpointType{v1.EndpointChatCompletions, v1.EndpointResponses, v1.EndpointMessages}
		case v1.ModelTypeImage:
			eps = []v1.EndpointType{v1.EndpointImageGeneration}
		case v1.ModelTypeVideo:
			eps = []v1.EndpointType{v1.EndpointVideoGeneration}
		case v1.ModelTypeEmbedding:
			eps = []v1.EndpointType{v1.EndpointEmbeddings}
		}
	}
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = string(e)
	}
	return out
}
