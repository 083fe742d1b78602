package fakeupstream

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
)

// PlainEnv names the environment variable that serves every fake over
// plain HTTP/1.1 instead: MODELGATE_FAKE_UPSTREAMS=http.
const PlainEnv = "MODELGATE_FAKE_UPSTREAMS"

// start serves h the way the vendors' APIs are served: HTTPS offering
// HTTP/2 and HTTP/1.1, with net/http/httptest's certificate for 127.0.0.1
// (RootCAs). Every vendor API is HTTPS, so that is the path the suites
// exercise unless PlainEnv asks for plain HTTP (the path of an in-cluster
// upstream without TLS).
func start(h http.Handler) *httptest.Server {
	if os.Getenv(PlainEnv) == "http" {
		return httptest.NewServer(h)
	}
	return startTLS(h)
}

func startTLS(h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = true
	s.StartTLS()
	return s
}

func startPlain(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// Client is an HTTP client that trusts the fakes' certificate (RootCAs)
// and negotiates HTTP/2 with them: what a test that builds an adapter
// alone gives it, where the composition root would give the process's
// upstream client.
func Client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: RootCAs(), MinVersion: tls.VersionTLS12}
	t.ForceAttemptHTTP2 = true
	return &http.Client{Transport: t}
}
