package openapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/http/openapi"
	"github.com/modelgate/modelgate/gateway/http/server"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/test/apicheck"
)

// TestDocumentIsValidOpenAPI31 is the document's lint: it parses, it is
// 3.1, and kin-openapi's validation (structure, references, JSON Schema
// 2020-12 schemas, unique operation IDs) passes.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	g := NewWithT(t)
	c, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Doc().IsOpenAPI31OrLater()).To(BeTrue())
	for path, item := range c.Doc().Paths.Map() {
		for method, op := range item.Operations() {
			g.Expect(op.Responses.Len()).To(BeNumerically(">", 0), "%s %s declares its responses", method, path)
			authenticated := op.Security == nil || len(*op.Security) > 0 // nil: the document's default, bearer
			if authenticated && (strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/api/")) {
				g.Expect(op.Responses.Status(401)).NotTo(BeNil(), "%s %s declares its authentication failure", method, path)
			}
		}
	}
}

// TestEveryRouteIsDocumented mounts the gateway's endpoint groups as the
// binary does (gateway/wire) and compares the server's patterns with the
// document's operations, both ways.
func TestEveryRouteIsDocumented(t *testing.T) {
	g := NewWithT(t)
	srv := server.New(server.Options{})
	handlers.Register(srv, handlers.Handlers{CountTokens: &handlers.CountTokensDeps{}, Embeddings: &handlers.EmbeddingsDeps{}})
	console.Register(srv, console.Deps{SessionKey: []byte("0123456789abcdef0123456789abcdef")})
	srv.Handle("GET "+blob.FilesPath, http.NotFoundHandler())
	var served []string
	for _, p := range srv.Patterns() {
		if p != "/" { // the unmatched fallback: x-unmatched describes it
			served = append(served, p)
		}
	}
	slices.Sort(served)
	c, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())
	documented := c.Patterns()
	var missing, extra []string
	for _, p := range served {
		if !slices.Contains(documented, p) {
			missing = append(missing, p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			extra = append(extra, p)
		}
	}
	g.Expect(missing).To(BeEmpty(), "served but not in the OpenAPI document")
	g.Expect(extra).To(BeEmpty(), "in the OpenAPI document but not served")
}

func TestServedAsJSONWithETag(t *testing.T) {
	g := NewWithT(t)
	mux := http.NewServeMux()
	handlers.Register(mux, handlers.Handlers{CountTokens: &handlers.CountTokensDeps{}, Embeddings: &handlers.EmbeddingsDeps{}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())

	req, _ := http.NewRequest(http.MethodGet, srv.URL+openapi.Path, nil)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	var doc map[string]any
	g.Expect(json.NewDecoder(resp.Body).Decode(&doc)).To(Succeed())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(doc).To(HaveKeyWithValue("openapi", "3.1.0"))
	etag := resp.Header.Get("ETag")
	g.Expect(etag).To(HavePrefix(`"`))
	g.Expect(c.Check(req, resp.StatusCode, resp.Header, openapi.JSON())).To(Succeed())

	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotModified))
	g.Expect(resp.Header.Get("ETag")).To(Equal(etag))
}

// TestCheckerRefusesWhatTheDocumentDoesNotSay: the e2e suite's validation
// can fail, for each thing it checks.
func TestCheckerRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	c, err := apicheck.Load()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a model list", "GET", "/v1/models", 200, jsonCT,
			`{"success":true,"object":"list","data":[],"has_more":false,"first_id":null,"last_id":null}`, true},
		{"a model list without data", "GET", "/v1/models", 200, jsonCT, `{"success":true,"object":"list","has_more":false}`, false},
		{"an undeclared status", "GET", "/v1/models", 302, jsonCT, `{}`, false},
		{"an undeclared content type", "GET", "/v1/models", 200, http.Header{"Content-Type": {"text/html"}}, `<p>`, false},
		{"the common error on a model", "GET", "/v1/models/a/b", 404, jsonCT,
			`{"error":{"code":404,"message":"model \"a/b\" not found","type":"not_found_error"}}`, true},
		{"the Anthropic error on messages", "POST", "/v1/messages", 400, jsonCT,
			`{"type":"error","error":{"type":"invalid_request_error","message":"x"}}`, true},
		{"the OpenAI error on messages", "POST", "/v1/messages", 400, jsonCT,
			`{"error":{"message":"x","type":"invalid_request_error","param":null,"code":null}}`, false},
		{"an unmatched path in its family's shape", "GET", "/v1/messages/nope", 404, jsonCT,
			`{"type":"error","error":{"type":"not_found_error","message":"no endpoint GET /v1/messages/nope"}}`, true},
		{"an unmatched path in another family's shape", "GET", "/v1/messages/nope", 404, jsonCT,
			`{"error":{"code":404,"message":"x","type":"not_found_error"}}`, false},
		{"an unmatched path answered 200", "GET", "/nowhere", 200, jsonCT, `{}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := httptest.NewRequest(tc.method, tc.path, nil)
			err := c.Check(req, tc.status, tc.header, []byte(tc.body))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
			}
		})
	}
}

// TestStreamEventsAreChecked: a Messages stream's events validate against
// the document's event schema, and one that does not is refused.
func TestStreamEventsAreChecked(t *testing.T) {
	g := NewWithT(t)
	c, err := apicheck.Load()
	g.Expect(err).NotTo(HaveOccurred())
	req := httptest.NewRequest("POST", "/v1/messages", nil)
	schema, err := c.CheckStream(req, 200, http.Header{"Content-Type": {"text/event-stream"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(schema).NotTo(BeNil())
	good := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"bogus\"" // cut off: not checked
	g.Expect(apicheck.CheckEvents(schema, []byte(good))).To(Succeed())
	// A type the API adds later passes through the gateway, so it is valid;
	// an event without a type is not.
	future := "event: x\ndata: {\"type\":\"future_event\"}\n\n"
	g.Expect(apicheck.CheckEvents(schema, []byte(future))).To(Succeed())
	bad := "event: x\ndata: {\"index\":0}\n\n"
	g.Expect(apicheck.CheckEvents(schema, []byte(bad))).NotTo(Succeed())

	_, err = c.CheckStream(httptest.NewRequest("GET", "/v1/models", nil), 200, http.Header{"Content-Type": {"text/event-stream"}})
	g.Expect(err).To(HaveOccurred(), "the model list declares no event stream")
}

// TestOpenAIStreamEventsAreChecked: the Chat Completions and Responses
// streams declare event schemas too: a chunk, an error and [DONE] pass,
// a chunk without choices or an event without a type does not.
func TestOpenAIStreamEventsAreChecked(t *testing.T) {
	c, err := apicheck.Load()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name, path, stream string
		ok                 bool
	}{
		{"chat chunks, usage and [DONE]", "/v1/chat/completions",
			`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1}}` + "\n\n" +
				"data: [DONE]\n\n", true},
		{"a chat stream ending in an error", "/v1/chat/completions", `data: {"error":{"message":"upstream failed","type":"server_error"}}` + "\n\n", true},
		{"a chat chunk without choices", "/v1/chat/completions", `data: {"id":"c1","object":"chat.completion.chunk"}` + "\n\n", false},
		{"Azure's prompt-filter chunk", "/v1/chat/completions", `data: {"choices":[],"created":0,"id":"","object":"","prompt_filter_results":[{"prompt_index":0}]}` + "\n\n", true},
		{"a chat choice without its index", "/v1/chat/completions", `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{}}]}` + "\n\n", false},
		{"responses events, a future one too", "/v1/responses",
			"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
				"event: response.future\ndata: {\"type\":\"response.future\",\"sequence_number\":1}\n\n", true},
		{"a responses event without a type", "/v1/responses", "data: {\"sequence_number\":0}\n\n", false},
		{"a responses event carrying a malformed response", "/v1/responses", "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			schema, err := c.CheckStream(httptest.NewRequest("POST", tc.path, nil), 200, http.Header{"Content-Type": {"text/event-stream"}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(schema).NotTo(BeNil())
			err = apicheck.CheckEvents(schema, []byte(tc.stream))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
			}
		})
	}
}
