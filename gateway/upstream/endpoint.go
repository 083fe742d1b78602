package upstream

import (
	"fmt"
	"strings"
)

// Endpoint joins a base URL and an API path that starts with /v1/: a base
// ending in /v1 is not doubled ("https://api.openai.com/v1" +
// "/v1/responses").
func Endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		return base + strings.TrimPrefix(path, "/v1")
	}
	return base + path
}

// CheckBase fails (Failover, not retried) when the backend has no usable
// base URL; task adapters call it, since a task backend has no default.
func CheckBase(b Backend) *Error {
	if !strings.HasPrefix(b.BaseURL, "http://") && !strings.HasPrefix(b.BaseURL, "https://") {
		return &Error{Class: Failover, Message: fmt.Sprintf("backend %q (%s) has no http(s) baseURL", b.Name, b.Provider)}
	}
	return nil
}
