package fakeupstream

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// AzureModel is the model Azure OpenAI names in its answers: the deployed
// model's version, not the deployment's name.
const AzureModel = "gpt-4o-2024-11-20"

// NewAzureOpenAI starts a fake of Azure OpenAI's chat completions, as
// Microsoft's REST reference describes them
// (learn.microsoft.com/azure/ai-foundry/openai/reference and
// …/openai/api-version-lifecycle): the deployment URL
// POST /openai/deployments/{deployment}/chat/completions?api-version=…
// (api-version required, the body's model optional) and the v1 API
// POST /openai/v1/chat/completions (model = the deployment's name). It
// requires the api-key header = Key(), or, once AcceptEntraID is called, an
// Authorization: Bearer token that Entra ID issued.
// Answers carry Azure's additions: the deployed model's name (AzureModel),
// prompt_filter_results and content_filter_results, and a stream's first
// chunk with no choices and only the prompt's filter results. Errors have
// Azure's shape {"error":{"code","message"}}.
func NewAzureOpenAI() *Server { return newServer(kindAzure) }

// SetDeployments names the deployments that exist; a request for another
// one gets Azure's DeploymentNotFound. None set: any name exists.
func (s *Server) SetDeployments(names ...string) {
	s.mu.Lock()
	s.deployments = map[string]bool{}
	for _, n := range names {
		s.deployments[n] = true
	}
	s.mu.Unlock()
}

// AcceptEntraID makes the fake also accept Microsoft Entra ID bearer tokens
// that idp issued (and has not revoked).
func (s *Server) AcceptEntraID(idp *EntraID) {
	s.mu.Lock()
	s.entraTokens = idp.Valid
	s.mu.Unlock()
}

var azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

func (s *Server) checkAzure(w http.ResponseWriter, r *http.Request, body []byte) bool {
	deployment, v1 := "", false
	op := "/chat/completions"
	if s.isEmbedding(r) {
		op = "/embeddings"
	}
	switch {
	case r.URL.Path == "/openai/v1"+op:
		v1 = true
	case strings.HasPrefix(r.URL.Path, "/openai/deployments/") && strings.HasSuffix(r.URL.Path, op):
		deployment = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), op)
		if d, err := url.PathUnescape(deployment); err == nil {
			deployment = d
		}
	}
	version := r.URL.Query().Get("api-version")
	switch {
	case r.Method != http.MethodPost || (!v1 && (deployment == "" || strings.Contains(deployment, "/"))):
		writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
		return false
	case !v1 && version == "":
		// The deployment API is versioned: without api-version Azure finds
		// no resource.
		writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
		return false
	case !v1 && !azureVersion.MatchString(version), v1 && version != "" && version != "preview" && version != "latest":
		writeAzureError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
		return false
	}
	s.mu.Lock()
	entra := s.entraTokens
	s.mu.Unlock()
	bearer, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Header.Get("api-key") != "":
		if r.Header.Get("api-key") != s.Key() {
			writeAzureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. "+
				"Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
			return false
		}
	case isBearer:
		if entra == nil || !entra(bearer) {
			writeAzureError(w, http.StatusUnauthorized, "401", "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.")
			return false
		}
	default:
		writeAzureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. "+
			"Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return false
	}
	validate := validateChat
	if op == "/embeddings" {
		validate = validateOpenAIEmbedding
	}
	if msg := validate(body, v1); msg != "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return false
	}
	if v1 {
		deployment = Request{Body: body}.Model()
	}
	s.mu.Lock()
	known := len(s.deployments) == 0 || s.deployments[deployment]
	s.mu.Unlock()
	if !known {
		writeAzureError(w, http.StatusNotFound, "DeploymentNotFound", "The API deployment for this resource does not exist. "+
			"If you created the deployment within the last 5 minutes, please wait a moment and try again.")
		return false
	}
	return true
}

// writeAzureError writes Azure's error shape: the platform's own errors
// carry a code only; errors the model service raises keep OpenAI's
// message, type and param beside it.
func writeAzureError(w http.ResponseWriter, status int, code, msg string) {
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := map[string]any{"code": code, "message": msg}
	if strings.HasSuffix(code, "_error") {
		e = map[string]any{"code": nil, "message": msg, "type": code, "param": nil}
	}
	if code == "" {
		e["code"] = strconv.Itoa(status)
	}
	writeJSON(w, status, map[string]any{"error": e})
}

// azureFilters is a content filter result with nothing filtered.
func azureFilters() map[string]any {
	ok := map[string]any{"filtered": false, "severity": "safe"}
	return map[string]any{"hate": ok, "self_harm": ok, "sexual": ok, "violence": ok}
}

func azurePromptFilters() []any {
	return []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilters()}}
}
