package framework

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/modelgate/modelgate/test/apicheck"
)

// APICheck validates every response from the registered gateways against
// the gateway's OpenAPI document (test/apicheck) and keeps the violations
// for the suite to assert on. It is a RoundTripper around another one: the
// gateway itself never runs the validator.
type APICheck struct {
	next    http.RoundTripper
	checker *apicheck.Checker

	mu         sync.Mutex
	hosts      map[string]bool
	checked    int
	violations []string
}

// CheckAPIResponses wraps http.DefaultTransport (which http.DefaultClient,
// http.Get and the official SDKs' default clients use) so that every
// response from the stack's gateways is validated.
func CheckAPIResponses(s *Stack) (*APICheck, error) {
	c, err := apicheck.Load()
	if err != nil {
		return nil, err
	}
	a := &APICheck{next: http.DefaultTransport, checker: c, hosts: map[string]bool{}}
	for _, base := range append([]string{s.BaseURL}, s.MoreURLs...) {
		a.AddGateway(base)
	}
	http.DefaultTransport = a
	return a, nil
}

// Wrap is a's validation around another transport, for a client that does
// not use http.DefaultTransport.
func (a *APICheck) Wrap(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = a.next
	}
	return &wrapped{a, next}
}

type wrapped struct {
	a    *APICheck
	next http.RoundTripper
}

func (w *wrapped) RoundTrip(req *http.Request) (*http.Response, error) {
	return w.a.roundTrip(w.next, req)
}

// AddGateway validates responses from another gateway (base URL) too.
func (a *APICheck) AddGateway(base string) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hosts[u.Host] = true
}

// RoundTrip implements http.RoundTripper.
func (a *APICheck) RoundTrip(req *http.Request) (*http.Response, error) {
	return a.roundTrip(a.next, req)
}

func (a *APICheck) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if err != nil || !a.gateway(req.URL.Host) {
		return resp, err
	}
	if apicheck.Streaming(resp.Header) {
		// A stream is read as it arrives: the test's reads must not wait
		// for its end, so its events are checked as the test read them,
		// when it reaches the end or closes the body.
		schema, err := a.checker.CheckStream(req, resp.StatusCode, resp.Header)
		a.record(req, resp.StatusCode, err)
		if schema != nil {
			resp.Body = &streamTee{ReadCloser: resp.Body, done: func(b []byte) {
				if err := apicheck.CheckEvents(schema, b); err != nil {
					a.record(req, resp.StatusCode, err)
				}
			}}
		}
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = &replay{Reader: bytes.NewReader(body), err: rerr}
	if rerr != nil {
		// A body cut short (a test that breaks the connection): nothing
		// whole to check.
		return resp, nil
	}
	a.record(req, resp.StatusCode, a.checker.Check(req, resp.StatusCode, resp.Header, body))
	return resp, nil
}

// streamTee keeps what the test reads of a stream and hands it to done
// once, at the end or at Close.
type streamTee struct {
	io.ReadCloser
	buf  []byte
	once sync.Once
	done func([]byte)
}

func (t *streamTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf = append(t.buf, p[:n]...)
	if err != nil {
		t.once.Do(func() { t.done(t.buf) })
	}
	return n, err
}

func (t *streamTee) Close() error {
	t.once.Do(func() { t.done(t.buf) })
	return t.ReadCloser.Close()
}

// replay gives the test the body read for the check, then the read error
// the check saw, if any.
type replay struct {
	*bytes.Reader
	err error
}

func (r *replay) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err == io.EOF && r.err != nil {
		err = r.err
	}
	return n, err
}

func (r *replay) Close() error { return nil }

func (a *APICheck) gateway(host string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hosts[host]
}

func (a *APICheck) record(req *http.Request, status int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checked++
	if err != nil {
		// The schema and value kin-openapi prints after the reason are
		// long; the reason names the schema, which is in the document.
		msg, _, _ := strings.Cut(err.Error(), "\nSchema:")
		a.violations = append(a.violations, fmt.Sprintf("%s %s -> %d: %s", req.Method, req.URL.RequestURI(), status, msg))
	}
}

// Take returns the violations since the last Take and forgets them.
func (a *APICheck) Take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.violations
	a.violations = nil
	return v
}

// Checked is how many responses were validated.
func (a *APICheck) Checked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.checked
}

// Proxy serves a loopback reverse proxy to the gateway at base whose every
// response is validated as the suite's own clients' are: the address to
// give a client in another process (a coding agent), which uses a
// transport of its own. Streams are relayed as they arrive. Close stops it.
func (a *APICheck) Proxy(base string) (*httptest.Server, error) {
	target, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	a.AddGateway(base)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport:     a.Wrap(nil),
		FlushInterval: -1,
	}
	return httptest.NewServer(rp), nil
}
