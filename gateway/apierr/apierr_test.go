package apierr

import (
	"net/http"
	"net/http/httptest"
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

func TestTypesByStatus(t *testing.T) {
	g := NewWithT(t)
	g.Expect(MessagesType(401)).To(Equal("authentication_error"))
	g.Expect(MessagesType(429)).To(Equal("rate_limit_error"))
	g.Expect(MessagesType(500)).To(Equal("api_error"))
	g.Expect(OpenAIType(400)).To(Equal("invalid_request_error"))
	g.Expect(OpenAIType(503)).To(Equal("api_error"))
}
