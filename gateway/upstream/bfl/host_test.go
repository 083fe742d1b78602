package bfl

import "testing"

func TestSameSite(t *testing.T) {
	for _, tc := range []struct {
		base, polling string
		want          bool
	}{
		{"https://api.bfl.ai", "https://api.us1.bfl.ai/v1/get_result?id=1", true},
		{"https://api.bfl.ai/v1", "https://api.eu1.bfl.ai/v1/get_result?id=1", true},
		{"https://api.bfl.ai", "http://api.us1.bfl.ai/v1/get_result?id=1", false},
		{"https://api.bfl.ai", "https://api.bfl.ai.evil.example/v1/get_result?id=1", false},
		{"https://api.bfl.ai", "https://evil.example/v1/get_result?id=1", false},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/get_result?id=1", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:9090/v1/get_result?id=1", false},
		{"https://api.bfl.ai", "", false},
		{"https://10.0.0.1", "https://20.0.0.1/v1/get_result?id=1", false},
		{"https://localhost", "https://other/v1/get_result?id=1", false},
	} {
		if got := sameSite(tc.base, tc.polling); got != tc.want {
			t.Errorf("sameSite(%q, %q) = %v, want %v", tc.base, tc.polling, got, tc.want)
		}
	}
}
