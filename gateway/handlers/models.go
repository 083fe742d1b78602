package handlers

import (
	"net/http"
	"slices"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/routing"
)

// Models serves GET /v1/models.
type Models struct{ *Deps }

type modelEntry struct {
	ID                     string   `json:"id"`
	Object                 string   `json:"object"`
	Created                int64    `json:"created"`
	OwnedBy                string   `json:"owned_by"`
	SupportedEndpointTypes []string `json:"supported_endpoint_types"`
}

// modelTypes maps the type parameter to the model types it selects. Async
// task models (video, audio) appear only when selected or with "all".
var modelTypes = map[string][]v1.ModelType{
	"text":  {v1.ModelTypeText},
	"chat":  {v1.ModelTypeText},
	"image": {v1.ModelTypeImage},
	"video": {v1.ModelTypeVideo},
	"audio": {v1.ModelTypeAudio},
	"all":   {v1.ModelTypeText, v1.ModelTypeImage, v1.ModelTypeVideo, v1.ModelTypeAudio},
}

// authFail answers an authentication failure in the common shape.
func (h *Models) authFail(w http.ResponseWriter, status int, message string) {
	apierr.Common(w, status, apierr.OpenAIType(status), message)
}

// List returns the models the key may use: allowed by its allow-list,
// served by a ready backend of one of its groups, and priced for that group.
func (h *Models) List(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	typ := r.URL.Query().Get("type")
	if typ == "" {
		typ = "text"
	}
	types, ok := modelTypes[typ]
	if !ok {
		apierr.Common(w, http.StatusBadRequest, "invalid_request_error", "type must be one of text, chat, image, video, audio, all")
		return
	}
	routes, err := h.Router.Visible(r.Context(), p.Tenant.Namespace)
	if err != nil {
		apierr.Common(w, http.StatusInternalServerError, apierr.OpenAIType(http.StatusInternalServerError), "could not list models")
		return
	}
	data := []modelEntry{}
	for _, rt := range routes {
		if !slices.Contains(types, rt.Spec.Type) || !p.AllowsModel(string(rt.Spec.Model)) || !h.usable(p, rt) {
			continue
		}
		data = append(data, modelEntry{
			ID: string(rt.Spec.Model), Object: "model", Created: rt.CreationTimestamp.Unix(),
			OwnedBy: ownedBy(rt), SupportedEndpointTypes: endpointTypes(rt),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "object": "list", "data": data})
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
		}
	}
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = string(e)
	}
	return out
}
