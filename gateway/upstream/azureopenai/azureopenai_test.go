package azureopenai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestURL(t *testing.T) {
	body := []byte(`{"model":"from-body","messages":[]}`)
	for _, tc := range []struct {
		name, base, model, version, want string
	}{
		{"v1 by default", "https://res.openai.azure.com", "dep", "", "https://res.openai.azure.com/openai/v1/chat/completions"},
		{"v1 named", "https://res.openai.azure.com/", "dep", "v1", "https://res.openai.azure.com/openai/v1/chat/completions"},
		{"v1 base not doubled", "https://res.openai.azure.com/openai/v1", "dep", "v1", "https://res.openai.azure.com/openai/v1/chat/completions"},
		{"deployment", "https://res.openai.azure.com", "my dep", "2024-10-21",
			"https://res.openai.azure.com/openai/deployments/my%20dep/chat/completions?api-version=2024-10-21"},
		{"deployment from the body", "https://res.openai.azure.com/openai", "", "2024-10-21",
			"https://res.openai.azure.com/openai/deployments/from-body/chat/completions?api-version=2024-10-21"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := upstream.Backend{BaseURL: tc.base, UpstreamModel: tc.model, Options: map[string]string{OptionAPIVersion: tc.version}}
			NewWithT(t).Expect(URL(b, body)).To(Equal(tc.want))
		})
	}
}

func TestSendAuthenticatesWithAPIKey(t *testing.T) {
	g := NewWithT(t)
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	b := upstream.Backend{BaseURL: srv.URL, APIKey: " secret\n", UpstreamModel: "dep", Options: map[string]string{OptionAPIVersion: "2024-10-21"}}
	resp, err := New(srv.Client()).Send(context.Background(), b, upstream.ChatCompletions, []byte(`{"model":"dep"}`), true, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(got.Header.Get("api-key")).To(Equal("secret"))
	g.Expect(got.Header.Get("Authorization")).To(BeEmpty())
	g.Expect(got.Header.Get("Accept")).To(Equal("text/event-stream"))
	g.Expect(got.URL.String()).To(Equal("/openai/deployments/dep/chat/completions?api-version=2024-10-21"))
}
