package upstream_test

import (
	"testing"

	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestEndpoint(t *testing.T) {
	for _, c := range []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "/v1/responses", "https://api.openai.com/v1/responses"},
		{"https://api.anthropic.com/", "/v1/messages", "https://api.anthropic.com/v1/messages"},
		{"http://x/proxy/v1/", "/v1/chat/completions", "http://x/proxy/v1/chat/completions"},
		{"https://up.example", "/v1/images/generations", "https://up.example/v1/images/generations"},
		{"https://up.example/", "/v1/images/generations", "https://up.example/v1/images/generations"},
		{"https://up.example/v1", "/v1/images/generations", "https://up.example/v1/images/generations"},
		{"https://up.example/v1/", "/v1/images/generations", "https://up.example/v1/images/generations"},
		{"https://up.example/api/", "/v1/images/generations", "https://up.example/api/v1/images/generations"},
	} {
		if got := upstream.Endpoint(c.base, c.path); got != c.want {
			t.Errorf("Endpoint(%q, %q) = %q, want %q", c.base, c.path, got, c.want)
		}
	}
}
