package apierr

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestShapes(t *testing.T) {
	cases := []struct {
		name   string
		write  func(http.ResponseWriter)
		status int
		body   string
	}{
		{"messages", func(w http.ResponseWriter) { Messages(w, 400, "invalid_request_error", "max_tokens: field required") },
			400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}`},
		{"openai", func(w http.ResponseWriter) { OpenAI(w, 401, "authentication_error", "invalid_api_key", "bad key") },
			401, `{"error":{"message":"bad key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`},
		{"openai null code", func(w http.ResponseWriter) { OpenAI(w, 400, "invalid_request_error", "", "x") },
			400, `{"error":{"message":"x","type":"invalid_request_error","param":null,"code":null}}`},
		{"common", func(w http.ResponseWriter) { Common(w, 404, "not_found_error", "task not found") },
			404, `{"error":{"code":404,"message":"task not found","type":"not_found_error"}}`},
		{"usage", func(w http.ResponseWriter) { Usage(w, 422, "invalid_query", "window longer than 31 days") },
			422, `{"success":false,"error":{"code":"invalid_query","message":"window longer than 31 days"}}`},
		{"simple", func(w http.ResponseWriter) { Simple(w, 200, "令牌名称过长") },
			200, `{"success":false,"message":"令牌名称过长"}`},
		{"pricing", func(w http.ResponseWriter) { Pricing(w, 404, "model_not_found", "no such model") },
			404, `{"error":{"code":"model_not_found","message":"no such model","type":"model_not_found"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := httptest.NewRecorder()
			c.write(rec)
			g.Expect(rec.Code).To(Equal(c.status))
			g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
			g.Expect(rec.Body.String()).To(MatchJSON(c.body))
		})
	}
}

func TestRetryAfterIsWholeSecondsAtLeastOne(t *testing.T) {
	g := NewWithT(t)
	rec := httptest.NewRecorder()
	RetryAfter(rec, 200*time.Millisecond)
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("1"))
	RetryAfter(rec, 2600*time.Millisecond)
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("3"))
}

// TestTypesByStatus is the table of docs/api-choices.md, "Error types by
// status", for both families.
func TestTypesByStatus(t *testing.T) {
	cases := []struct {
		status           int
		messages, openAI string
	}{
		{400, "invalid_request_error", "invalid_request_error"},
		{401, "authentication_error", "authentication_error"},
		{402, "billing_error", "insufficient_quota"},
		{403, "permission_error", "permission_error"},
		{404, "not_found_error", "not_found_error"},
		{405, "invalid_request_error", "invalid_request_error"},
		{408, "invalid_request_error", "invalid_request_error"},
		{409, "invalid_request_error", "invalid_request_error"},
		{413, "request_too_large", "invalid_request_error"},
		{422, "invalid_request_error", "invalid_request_error"},
		{429, "rate_limit_error", "rate_limit_error"},
		{500, "api_error", "server_error"},
		{501, "api_error", "server_error"},
		{502, "api_error", "server_error"},
		{503, "api_error", "server_error"},
		{504, "timeout_error", "server_error"},
		{529, "overloaded_error", "server_error"},
		{0, "api_error", "server_error"}, // no status: the server's fault
	}
	for _, c := range cases {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(MessagesType(c.status)).To(Equal(c.messages), "messages")
			g.Expect(OpenAIType(c.status)).To(Equal(c.openAI), "openai")
		})
	}
}

// TestStatusOfTypes: every type of either table maps back to the status it
// is named for, and a type of no table is not guessed.
func TestStatusOfTypes(t *testing.T) {
	g := NewWithT(t)
	for typ, status := range map[string]int{
		"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
		"insufficient_quota": 402, "permission_error": 403, "not_found_error": 404,
		"request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
		"server_error": 500, "timeout_error": 504, "overloaded_error": 529,
	} {
		got, ok := StatusOf(typ)
		g.Expect(ok).To(BeTrue(), typ)
		g.Expect(got).To(Equal(status), typ)
	}
	// Types both families use (invalid_request_error, rate_limit_error, ...)
	// stand for the same status in both.
	for _, f := range []family{anthropic, openAI} {
		for status, typ := range f.byStatus {
			got, _ := StatusOf(typ)
			g.Expect(got).To(Equal(status), typ)
		}
	}
	_, ok := StatusOf("slow_down")
	g.Expect(ok).To(BeFalse())
}
