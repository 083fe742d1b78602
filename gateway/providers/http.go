package providers

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"time"
)

// Transport is the shared upstream transport: many idle connections per
// host, HTTP/2 when the upstream offers it, bounded dial and TLS times.
var Transport = &http.Transport{
	Proxy: http.ProxyFromEnvironment,
	DialContext: (&net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          4096,
	MaxIdleConnsPerHost:   1024,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	ReadBufferSize:        32 << 10,
	WriteBufferSize:       32 << 10,
}

// Client is the shared upstream HTTP client. Time limits come from the
// request's context (see Invoke), not from Client.Timeout, so streams can
// run as long as they need.
var Client = &http.Client{Transport: Transport}

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

// NewJSONRequest builds a POST of body to url with JSON content type and,
// for streams, an event-stream Accept header.
func NewJSONRequest(ctx context.Context, url string, body []byte, stream bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	return req, nil
}
