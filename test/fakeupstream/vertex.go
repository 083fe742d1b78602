package fakeupstream

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The Vertex AI fake, written from Google's and Anthropic's public
// references (cloud.google.com/vertex-ai/generative-ai/docs/reference/rest-rpc,
// …/partner-models/claude/use-claude, docs.anthropic.com/en/api/claude-on-vertex-ai,
// …/error-code-429, developers.google.com/identity/protocols/oauth2/service-account):
//
//   - POST /{v1|v1beta1}/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
//     and :streamGenerateContent (alt=sse: server-sent events), Gemini's
//     GenerateContentRequest and answers (the Gemini fake's);
//   - POST …/publishers/anthropic/models/{model}:rawPredict and
//     :streamRawPredict, an Anthropic Messages body without model and with
//     anthropic_version "vertex-2023-10-16", Anthropic's answers and events;
//   - Authorization: Bearer with an access token this fake issued and that
//     has not expired (401 UNAUTHENTICATED otherwise), for its project only
//     (403 PERMISSION_DENIED);
//   - POST /token, Google's OAuth2 token endpoint for service accounts: the
//     JWT-bearer grant, whose RS256 assertion is verified with the public
//     half of the key ServiceAccountJSON holds (issuer, audience, scope and
//     lifetime checked), answered with an access token of TokenTTL.
//
// Batch prediction jobs and the Cloud Storage calls they need are on the
// same server (vertex_batch.go).
//
// Errors have Google's shape {"error":{"code","message","status"}}, except
// that the Claude models' own errors (anything but the platform's quota
// 429) keep Anthropic's {"type":"error","error":{"type","message"}}.

// VertexProject is the project the fake's service account belongs to.
const VertexProject = "modelgate-fake-project"

// vertexTokenPath is the fake's OAuth2 token endpoint.
const vertexTokenPath = "/token"

// vertexScope is the OAuth2 scope a token must be asked for.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexState is the fake's service account and the tokens it issued,
// under the Server's lock.
type vertexState struct {
	key      *rsa.PrivateKey
	keyID    string
	email    string
	ttl      time.Duration
	issued   map[string]time.Time // access token → expiry
	exchange int                  // token requests granted
	refused  int                  // token requests refused
	// batch is the batch prediction jobs and Cloud Storage (vertex_batch.go).
	batch *vertexBatchState
}

// NewVertex starts a fake of Vertex AI and of Google's OAuth2 token
// endpoint, with a fresh service account (ServiceAccountJSON) whose tokens
// last an hour unless SetTokenTTL says otherwise.
func NewVertex() *Server {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	v := &vertexState{key: key, keyID: randomHex(20), email: "modelgate@" + VertexProject + ".iam.gserviceaccount.com",
		ttl: time.Hour, issued: map[string]time.Time{}}
	s := newServer(kindVertex)
	s.mu.Lock()
	s.vertex = v
	s.mu.Unlock()
	return s
}

// ServiceAccountJSON is a service-account key file for the fake: the JSON
// the Cloud console downloads, its token_uri this fake's token endpoint.
func (s *Server) ServiceAccountJSON() string {
	s.mu.Lock()
	v := s.vertex
	s.mu.Unlock()
	der, err := x509.MarshalPKCS8PrivateKey(v.key)
	if err != nil {
		panic(err)
	}
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  VertexProject,
		"private_key_id":              v.keyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                v.email,
		"client_id":                   "104242424242424242424",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   s.URL + vertexTokenPath,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/" + v.email,
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	return string(b)
}

// SetTokenTTL sets the lifetime of the access tokens issued from now on
// (whole seconds, as expires_in is).
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	s.vertex.ttl = d
	s.mu.Unlock()
}

// TokenExchanges is the number of access tokens issued.
func (s *Server) TokenExchanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vertex.exchange
}

// RevokeTokens invalidates every access token issued so far.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	clear(s.vertex.issued)
	s.mu.Unlock()
}

// vertexRoute is a parsed Vertex AI method path.
type vertexRoute struct {
	version, project, location, publisher, model, method string
}

// vertexPath splits /{version}/projects/{p}/locations/{l}/publishers/{pub}/models/{model}:{method}.
func vertexPath(path string) (vertexRoute, bool) {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(seg) != 9 || seg[1] != "projects" || seg[3] != "locations" || seg[5] != "publishers" || seg[7] != "models" {
		return vertexRoute{}, false
	}
	model, method, ok := strings.Cut(seg[8], ":")
	rt := vertexRoute{version: seg[0], project: seg[2], location: seg[4], publisher: seg[6], model: model, method: method}
	return rt, ok && model != "" && rt.project != "" && rt.location != ""
}

func (rt vertexRoute) stream() bool {
	return rt.method == "streamGenerateContent" || rt.method == "streamRawPredict"
}

// wire is the vendor wire a request is answered in: a Vertex request's
// publisher's, else the server's own.
func (s *Server) wire(r *http.Request) kind {
	if s.kind != kindVertex {
		return s.kind
	}
	if rt, ok := vertexPath(r.URL.Path); ok && rt.publisher == "anthropic" {
		return kindAnthropic
	}
	return kindGemini
}

// checkVertex enforces what Vertex AI rejects: the route, the access
// token, the project, and the publisher's body.
func (s *Server) checkVertex(w http.ResponseWriter, r *http.Request, body []byte) bool {
	rt, ok := vertexPath(r.URL.Path)
	methods := map[string][]string{"google": {"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"}, "anthropic": {"rawPredict", "streamRawPredict"}}
	if r.Method != http.MethodPost || !ok || (rt.version != "v1" && rt.version != "v1beta1") || !slices.Contains(methods[rt.publisher], rt.method) {
		writeJSON(w, http.StatusNotFound, geminiError(404, "The requested URL "+r.URL.Path+" was not found on this server.", ""))
		return false
	}
	if !s.validToken(r.Header.Get("Authorization")) {
		writeJSON(w, http.StatusUnauthorized, geminiError(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, "+
			"login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.", ""))
		return false
	}
	resource := fmt.Sprintf("projects/%s/locations/%s/publishers/%s/models/%s", rt.project, rt.location, rt.publisher, rt.model)
	if rt.project != VertexProject {
		writeJSON(w, http.StatusForbidden, geminiError(403, "Permission 'aiplatform.endpoints.predict' denied on resource "+
			"'//aiplatform.googleapis.com/"+resource+"' (or it may not exist).", ""))
		return false
	}
	if rt.publisher == "anthropic" && rt.model == vertexCountModel {
		if msg := validateVertexClaudeCount(body, rt); msg != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
			return false
		}
		return true
	}
	family := map[string]string{"google": "gemini", "anthropic": "claude"}[rt.publisher]
	if !strings.HasPrefix(rt.model, family) {
		writeJSON(w, http.StatusNotFound, geminiError(404, "Publisher Model `"+resource+"` was not found or your project does not have access to it.", ""))
		return false
	}
	if rt.publisher == "google" && (rt.method == "embedContent" || rt.method == "batchEmbedContents") {
		if msg := validateGeminiEmbedding(resource, rt.method, body); msg != "" {
			writeJSON(w, http.StatusBadRequest, geminiError(400, msg, ""))
			return false
		}
		return true
	}
	if rt.publisher == "google" {
		if msg := validateGemini(body); msg != "" {
			writeJSON(w, http.StatusBadRequest, geminiError(400, msg, ""))
			return false
		}
		return true
	}
	if msg := validateVertexMessages(body, rt); msg != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
		return false
	}
	return true
}

// validateVertexMessages checks a Claude body: anthropic_version
// vertex-2023-10-16 and no model (the URL names it), the stream flag
// matching the method, then what the Messages API checks.
func validateVertexMessages(body []byte, rt vertexRoute) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	var version string
	_ = json.Unmarshal(m["anthropic_version"], &version)
	switch {
	case version == "":
		return "anthropic_version: Field required"
	case version != "vertex-2023-10-16":
		return fmt.Sprintf("anthropic_version: Input should be 'vertex-2023-10-16' (got %q)", version)
	case m["model"] != nil:
		return "model: Extra inputs are not permitted"
	}
	var stream bool
	_ = json.Unmarshal(m["stream"], &stream)
	if stream != (rt.method == "streamRawPredict") {
		return fmt.Sprintf("stream: %v does not match the method %s", stream, rt.method)
	}
	delete(m, "anthropic_version")
	m["model"], _ = json.Marshal(rt.model)
	b, _ := json.Marshal(m)
	return validateMessages(b)
}

// validToken reports whether an Authorization header carries an unexpired
// token this fake issued.
func (s *Server) validToken(auth string) bool {
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.vertex.issued[token]
	return ok && time.Now().Before(exp)
}

// vertexError writes a scripted error: Google's shape, but Anthropic's for
// a Claude model's own errors.
func (s *Server) vertexError(w http.ResponseWriter, r *http.Request, reply Reply) {
	msg := reply.ErrorMessage
	if s.wire(r) == kindAnthropic && reply.Status != http.StatusTooManyRequests {
		typ := reply.ErrorType
		if typ == "" {
			typ = anthropicErrorType(reply.Status)
		}
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeJSON(w, reply.Status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		return
	}
	if msg == "" && reply.Status == http.StatusTooManyRequests {
		msg = "Resource exhausted, please try again later."
	} else if msg == "" {
		msg = http.StatusText(reply.Status)
	}
	writeJSON(w, reply.Status, geminiError(reply.Status, msg, reply.RetryDelay))
}

// vertexReply answers in the publisher's wire.
func (s *Server) vertexReply(w http.ResponseWriter, r *http.Request, req Request, reply Reply, stream bool) {
	if s.wire(r) == kindAnthropic {
		s.anthropicReply(w, r, req, reply, stream)
		return
	}
	s.geminiReply(w, r, req.Model(), reply, stream)
}

// serveToken is Google's OAuth2 token endpoint for the JWT-bearer grant.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	refuse := func(code, desc string) {
		s.mu.Lock()
		s.vertex.refused++
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		refuse("invalid_request", "Invalid request")
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		refuse("unsupported_grant_type", "Invalid grant_type: "+g)
		return
	}
	s.mu.Lock()
	v := s.vertex
	pub, keyID, email, ttl := &v.key.PublicKey, v.keyID, v.email, v.ttl
	s.mu.Unlock()
	claims, kid, ok := verifyRS256(r.PostForm.Get("assertion"), pub)
	if !ok || kid != keyID {
		refuse("invalid_grant", "Invalid JWT Signature.")
		return
	}
	now := time.Now().Unix()
	switch {
	case claims.Iss != email:
		refuse("invalid_grant", "Invalid JWT: the issuer is not the service account.")
	case claims.Aud != s.URL+vertexTokenPath:
		refuse("invalid_grant", "Invalid JWT: audience is not the token endpoint.")
	case claims.Exp <= now || claims.Iat > now+60 || claims.Exp-claims.Iat > 3600:
		refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	case !slices.Contains(strings.Fields(claims.Scope), vertexScope):
		refuse("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
	default:
		token := "ya29.fake-" + randomHex(24)
		s.mu.Lock()
		v.issued[token] = time.Now().Add(ttl)
		v.exchange++
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"access_token": token, "expires_in": int64(ttl / time.Second), "token_type": "Bearer"})
	}
}

// jwtClaims are the claims of a service account's assertion.
type jwtClaims struct {
	Iss   string `json:"iss"`
	Scope string `json:"scope"`
	Aud   string `json:"aud"`
	Exp   int64  `json:"exp"`
	Iat   int64  `json:"iat"`
}

// verifyRS256 checks a compact JWS signed with RS256 by pub and returns its
// claims and key ID.
func verifyRS256(token string, pub *rsa.PublicKey) (jwtClaims, string, bool) {
	var c jwtClaims
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c, "", false
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "RS256" || json.Unmarshal(cb, &c) != nil {
		return c, "", false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return c, "", false
	}
	return c, hdr.Kid, true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TokenRefusals is the number of token requests refused.
func (s *Server) TokenRefusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vertex.refused
}
