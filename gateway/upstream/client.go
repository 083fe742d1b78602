package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

// dialer opens upstream connections: bounded dial time, TCP keep-alive.
var dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// MaxResponseHeaderBytes bounds an upstream answer's status line and
// headers, 1xx answers included. A model API's headers are a few KiB; a
// peer that sends more fails the call instead of growing the heap.
const MaxResponseHeaderBytes = 1 << 20

// DefaultResponseHeaderTimeout bounds the wait for an upstream's response
// headers after the request is written (--upstream-response-header-timeout).
// A non-streamed answer arrives whole, headers last, so the bound is a
// ceiling above any backend's own timeout (timeoutSeconds), which ends a
// call earlier: the ceiling ends a silent upstream whose caller set none.
const DefaultResponseHeaderTimeout = 10 * time.Minute

// NewTransport returns the upstream transport of every adapter, HTTPS and
// plain HTTP alike: net/http's, which reads each idle connection
// continuously and closes one that sends bytes nobody asked for, so no byte
// of one answer can reach the next request on a pooled connection. Many
// idle connections per host (the text hot path reuses them), HTTP/2 when
// the upstream offers it, bounded dial, TLS and header times, a header size
// cap. headerTimeout bounds the wait for response headers; zero or less: no
// bound.
func NewTransport(headerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  max(headerTimeout, 0),
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		// An open stream over HTTP/1.1 holds one connection's pair of
		// buffers for its whole life, and reads and writes larger than a
		// buffer pass it by (bufio), so bigger buffers buy no throughput
		// but cost memory per open stream. The read buffer keeps the
		// default 4 KiB: it takes a burst of events in one read. The write
		// buffer holds a request's headers (and a small body) once per
		// request and then sits idle for the stream's life: 1 KiB of it
		// still sends a short request in one write, a longer body goes out
		// in a second.
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 1 << 10,
	}
}

// Egress is one process's outbound HTTP, built once by the composition root
// (NewEgress) and passed to whatever calls out: the adapters, the task
// output downloads.
type Egress struct {
	// API reaches the platform-configured upstream endpoints (a route's
	// baseURL). Time limits come from the request's context (see Invoke),
	// not from a client timeout, so streams can run as long as they need.
	API *http.Client
	// Downloads fetches the output URLs a task upstream names: only public
	// addresses (and the guard's allow-list), rechecked on every redirect,
	// since the URL is not the platform's choice.
	Downloads *http.Client
}

// EgressOptions shape NewEgress.
type EgressOptions struct {
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers; zero or less: no bound.
	ResponseHeaderTimeout time.Duration
	// Guard decides which addresses Downloads may dial; nil: public only.
	Guard *netguard.Guard
	// WrapAPI, when set, wraps the API transport (trace context per
	// upstream attempt).
	WrapAPI func(http.RoundTripper) http.RoundTripper
	// RootCAs, when set, replaces the system roots both clients verify
	// certificates with: --upstream-ca-file gives the system roots plus a
	// private CA (an in-cluster model server and the outputs it links to),
	// tests their fakes' certificate (the production path, HTTPS and
	// HTTP/2, with verification on). nil: the system roots.
	RootCAs *x509.CertPool
}

// DownloadsOr is e.Downloads, or a client that dials public addresses only
// when e has none (a Call a test builds alone).
func (e Egress) DownloadsOr() *http.Client {
	if e.Downloads != nil {
		return e.Downloads
	}
	return (*netguard.Guard)(nil).Client(netguard.ClientOptions{MaxRedirects: 5})
}

// NewEgress builds a process's outbound clients.
func NewEgress(o EgressOptions) Egress {
	t := NewTransport(o.ResponseHeaderTimeout)
	if o.RootCAs != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	var api http.RoundTripper = t
	if o.WrapAPI != nil {
		api = o.WrapAPI(api)
	}
	return Egress{
		API:       &http.Client{Transport: api},
		Downloads: o.Guard.Client(netguard.ClientOptions{MaxRedirects: 5, RootCAs: o.RootCAs}),
	}
}

// RoundTrip sends a text request through c's transport alone, as a reverse
// proxy does. A model API answers rather than redirects, and following a
// redirect would carry the vendor's credential header (x-api-key, api-key,
// a signature) wherever the Location points: a 3xx is returned as the
// answer, a non-2xx like any other. It also spares each request the copy of
// its headers that http.Client keeps for redirects. A client with a
// timeout, a cookie jar or a redirect policy of its own is used as is.
func RoundTrip(c *http.Client, req *http.Request) (*http.Response, error) {
	if c.Timeout != 0 || c.Jar != nil || c.CheckRedirect != nil {
		return c.Do(req)
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return rt.RoundTrip(req)
}

// ClientOr is c, or a client of its own on a new upstream transport when c
// is nil: the composition root passes its Egress.API to every adapter;
// tests that build one alone pass nil.
func ClientOr(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Transport: NewTransport(DefaultResponseHeaderTimeout)}
	}
	return c
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

// MaxBody bounds a task upstream's JSON answer (inline base64 images
// included).
const MaxBody = 64 << 20

// Exchange is one task HTTP request's outcome.
type Exchange struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a task request with client (nil: ClientOr) and reads the answer
// (at most MaxBody). A transport failure (refused, reset, timeout) is
// returned as an *Error of class onNetwork.
func Do(client *http.Client, req *http.Request, onNetwork Class) (*Exchange, error) {
	resp, err := ClientOr(client).Do(req)
	if err != nil {
		msg := "the upstream could not be reached"
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			msg = "the upstream did not answer in time"
		}
		return nil, &Error{Class: onNetwork, Message: msg, Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, &Error{Class: onNetwork, Status: resp.StatusCode, Message: "the upstream's answer was cut off", Retryable: true, Err: err}
	}
	if len(body) > MaxBody {
		return nil, &Error{Class: Permanent, Status: resp.StatusCode, Message: "the upstream's answer is too large"}
	}
	return &Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// TaskRequest is one JSON request of a task adapter to its vendor.
type TaskRequest struct {
	Method, URL string
	Body        []byte // nil: no body
	Timeout     time.Duration
	// Submit: nothing has been accepted yet, so a failure may move the task
	// to another backend; afterwards a failure is the task's own.
	Submit bool
	// Authorize sets the vendor's authentication (and any header of its own).
	Authorize func(*http.Request)
	// Client sends it: the call's Egress.API (nil: ClientOr).
	Client *http.Client
}

// Send sends r under its timeout and reads the answer whatever its status:
// the adapter classifies a non-2xx one (Exchange.OK). An unusable URL is an
// *Error of class Failover on submission and Permanent afterwards; a
// transport failure is Failover on submission and Transient afterwards.
func (r TaskRequest) Send(ctx context.Context) (*Exchange, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		class := Failover
		if !r.Submit {
			class = Permanent
		}
		return nil, &Error{Class: class, Message: "invalid upstream URL", Err: err}
	}
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if r.Authorize != nil {
		r.Authorize(req)
	}
	onNetwork := Transient
	if r.Submit {
		onNetwork = Failover
	}
	return Do(r.Client, req, onNetwork)
}

// KeyHeader authorizes a request with the backend's key in header, after
// prefix ("Bearer "); no key, no header.
func KeyHeader(header, prefix, key string) func(*http.Request) {
	return func(req *http.Request) {
		if k := strings.TrimSpace(key); k != "" {
			req.Header.Set(header, prefix+k)
		}
	}
}

// OK reports a 2xx answer.
func (x *Exchange) OK() bool { return x.Status >= 200 && x.Status <= 299 }
