// Package upstream holds the adapters that run image and video generation
// tasks on real upstream APIs for the GenerationTask controller: one
// interface (Adapter), a registry by provider name, and one sub-package per
// wire format (taskapi, openai). The controller owns the task's life cycle
// (which backend, when to poll, billing, storing outputs); an adapter only
// translates one submission and one poll into HTTP and classifies what went
// wrong.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelgate/modelgate/gateway/netguard"
)

// Kind is the task family: image or video.
type Kind string

// The families.
const (
	Image Kind = "image"
	Video Kind = "video"
)

// Backend is the route backend a call goes to, credential resolved.
type Backend struct {
	// Name is the backend's name inside its route (for messages).
	Name string
	// Provider is the adapter's registered name.
	Provider string
	// BaseURL is the upstream API root, with or without a trailing /v1.
	BaseURL string
	// Credential is the upstream secret (sent as a Bearer token). Never logged.
	Credential string
	// UpstreamModel replaces the client's model in the forwarded request.
	UpstreamModel string
	// Options are the backend's provider-specific settings.
	Options map[string]string
	// Timeout bounds one HTTP exchange (a submission or a poll); zero means
	// the adapter's default.
	Timeout time.Duration
}

// String describes b without its credential.
func (b Backend) String() string {
	return fmt.Sprintf("Backend{Name:%s Provider:%s BaseURL:%s UpstreamModel:%s}", b.Name, b.Provider, b.BaseURL, b.UpstreamModel)
}

// GoString is String, so %#v does not print the credential either.
func (b Backend) GoString() string { return b.String() }

// Call is one task on one backend.
type Call struct {
	Backend Backend
	// Kind is image or video.
	Kind Kind
	// TaskID is the gateway's task ID; adapters use it as the idempotency
	// key upstream where the API has one, so that a submission repeated
	// after a crash finds the first one.
	TaskID string
	// Request is the validated request body (GenerationTask.spec.request),
	// to forward with the model replaced by Backend.UpstreamModel.
	Request json.RawMessage
}

// Model is the model to send upstream: the backend's upstream model, else
// the request's own.
func (c Call) Model() string {
	if c.Backend.UpstreamModel != "" {
		return c.Backend.UpstreamModel
	}
	var body struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(c.Request, &body)
	return body.Model
}

// State is where an upstream task stands.
type State string

// The states.
const (
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
)

// Output is one generated asset: a URL to download (usually short-lived),
// or the bytes themselves.
type Output struct {
	URL         string
	Data        []byte
	ContentType string
}

// Status is what a poll found.
type Status struct {
	State State
	// Progress is 0 to 100 (running only).
	Progress int
	// Outputs are the generated assets (succeeded only).
	Outputs []Output
	// VideoSeconds is the length of a produced video when the upstream
	// reports it; 0 when unknown.
	VideoSeconds int64
	// ErrorMessage says why the upstream failed the task (failed only).
	ErrorMessage string
	// ErrorCode is the upstream's error code for it, when it gave one as
	// a string (content_policy_violation, …).
	ErrorCode string
	// RetryAfter is the upstream's requested wait before the next poll; 0
	// when it asked for none.
	RetryAfter time.Duration
	// Usage is the token usage a token-priced image model reports
	// (succeeded only); nil when the upstream reports none.
	Usage *Usage
}

// Usage is an image model's token usage as OpenAI's Images API and this
// contract's task object report it.
type Usage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails *struct {
		TextTokens   int64 `json:"text_tokens"`
		ImageTokens  int64 `json:"image_tokens"`
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details,omitempty"`
	OutputTokensDetails *struct {
		TextTokens  int64 `json:"text_tokens"`
		ImageTokens int64 `json:"image_tokens"`
	} `json:"output_tokens_details,omitempty"`
}

// Valid reports whether the figures are usable for billing: not negative,
// and the details (when given) add up to their totals.
func (u *Usage) Valid() bool {
	if u == nil || u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens+u.OutputTokens == 0 {
		return false
	}
	if d := u.InputTokensDetails; d != nil && (d.TextTokens < 0 || d.ImageTokens < 0 || d.TextTokens+d.ImageTokens != u.InputTokens || d.CachedTokens < 0 || d.CachedTokens > u.InputTokens) {
		return false
	}
	if d := u.OutputTokensDetails; d != nil && (d.TextTokens < 0 || d.ImageTokens < 0 || d.TextTokens+d.ImageTokens != u.OutputTokens) {
		return false
	}
	return true
}

// Submitted is an accepted submission.
type Submitted struct {
	// ID is the upstream's task ID (empty for a synchronous upstream that
	// has none).
	ID string
	// Final is set when the upstream answered with the final result right
	// away (a synchronous API, or a replay of a task already finished).
	Final *Status
}

// Adapter speaks one upstream wire format.
type Adapter interface {
	// Submit sends the task. An error is an *Error (see Classify).
	Submit(ctx context.Context, c Call) (Submitted, error)
	// Poll asks for the state of an accepted task. An error is an *Error.
	Poll(ctx context.Context, c Call, upstreamID string) (Status, error)
}

// Canceler is an Adapter whose vendor API can cancel an accepted task. The
// GenerationTask controller calls it, best effort, when a task is deleted
// before it finishes; adapters without it leave the upstream task to finish
// on its own (nothing is charged to the tenant either way).
type Canceler interface {
	Cancel(ctx context.Context, c Call, upstreamID string) error
}

// Class says what the controller should do about a failed exchange.
type Class int

// The classes.
const (
	// Failover: nothing was accepted (or charged) upstream; the task may
	// move to another backend. Only a submission fails this way.
	Failover Class = iota + 1
	// Permanent: the upstream refused the task (or lost it); the task
	// fails with the upstream's message.
	Permanent
	// Transient: a poll failed in a way worth retrying later (network,
	// 5xx, 429); the task keeps polling with back-off.
	Transient
)

func (c Class) String() string {
	switch c {
	case Failover:
		return "failover"
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	}
	return "unknown"
}

// Error is a classified upstream failure.
type Error struct {
	Class Class
	// Status is the upstream's HTTP status; 0 when there was no answer.
	Status int
	// Message is safe to show to the client (the upstream's own error
	// message, or a description of the transport failure).
	Message string
	// Code is the upstream's error code (or, without one, its error type)
	// when its body names one as a string.
	Code string
	// RetryAfter is the upstream's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Retry reports that the same backend may be tried again later (a
	// network failure, 429 or 5xx) rather than being unusable for this task
	// (a configuration problem, an unsupported request).
	Retry bool
	// Err is the underlying error, for logs.
	Err error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("upstream %s error", e.Class)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	s += ": " + e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// AsError returns err's *Error; an unclassified error is Transient when it
// looks like a network failure and Permanent otherwise.
func AsError(err error) *Error {
	var ue *Error
	if errors.As(err, &ue) {
		return ue
	}
	if isNetwork(err) {
		return &Error{Class: Transient, Message: "the upstream could not be reached", Retry: true, Err: err}
	}
	return &Error{Class: Permanent, Message: err.Error(), Err: err}
}

// Unsupported is a Failover error for a request this backend cannot serve
// (another backend may).
func Unsupported(format string, args ...any) *Error {
	return &Error{Class: Failover, Message: fmt.Sprintf(format, args...)}
}

var registry = struct {
	sync.RWMutex
	m map[string]Adapter
}{m: map[string]Adapter{}}

// Register makes a available under the provider name. It panics on a
// duplicate; call it from an adapter package's init.
func Register(name string, a Adapter) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic("upstream: Register called twice for " + name)
	}
	registry.m[name] = a
}

// Get returns the adapter registered under name.
func Get(name string) (Adapter, bool) {
	registry.RLock()
	defer registry.RUnlock()
	a, ok := registry.m[name]
	return a, ok
}

// Names lists the registered adapters, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.m))
	for n := range registry.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Downloads fetches the output URLs an upstream names: only public
// addresses (and the process's allow-list), rechecked on every redirect,
// since the URL is not the platform's choice. Time limits come from the
// request contexts.
var Downloads = netguard.Default.Client(netguard.ClientOptions{MaxRedirects: 5})

// Client is the HTTP client of every adapter (platform-configured base
// URLs). Time limits come from the request contexts.
var Client = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          256,
	MaxIdleConnsPerHost:   64,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
}}

// Endpoint joins a base URL and an API path that starts with /v1/, without
// doubling a base that already ends in /v1.
func Endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		return base + strings.TrimPrefix(path, "/v1")
	}
	return base + path
}

// MaxBody bounds an upstream JSON answer (inline base64 images included).
const MaxBody = 64 << 20

// Exchange is one HTTP request's outcome.
type Exchange struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends req and reads the answer (at most MaxBody). A transport failure
// (refused, reset, timeout) is returned as an *Error of class onNetwork.
func Do(req *http.Request, onNetwork Class) (*Exchange, error) {
	resp, err := Client.Do(req)
	if err != nil {
		msg := "the upstream could not be reached"
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			msg = "the upstream did not answer in time"
		}
		return nil, &Error{Class: onNetwork, Message: msg, Retry: true, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, &Error{Class: onNetwork, Status: resp.StatusCode, Message: "the upstream's answer was cut off", Retry: true, Err: err}
	}
	if len(body) > MaxBody {
		return nil, &Error{Class: Permanent, Status: resp.StatusCode, Message: "the upstream's answer is too large"}
	}
	return &Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// StatusError classifies a non-2xx answer. On a submission (submit true)
// nothing was accepted: 429, 408, 5xx and the backend's own authentication
// failures (401, 403, 407) move the task to another backend; other 4xx are
// the request's fault and fail it. On a poll, 429, 408 and 5xx are retried
// later, other 4xx fail the task.
func StatusError(x *Exchange, submit bool, now time.Time) *Error {
	e := &Error{Status: x.Status, Message: ErrorMessage(x.Body), Code: ErrorCode(x.Body),
		RetryAfter: ParseRetryAfter(x.Header.Get("Retry-After"), now)}
	if e.Message == "" {
		e.Message = http.StatusText(x.Status)
	}
	retry := x.Status == http.StatusTooManyRequests || x.Status == http.StatusRequestTimeout || x.Status >= 500
	auth := x.Status == http.StatusUnauthorized || x.Status == http.StatusForbidden || x.Status == http.StatusProxyAuthRequired
	switch {
	case submit && retry:
		e.Class, e.Retry = Failover, true
	case submit && auth:
		e.Class = Failover
		e.Message = "the upstream refused the backend's credential: " + e.Message
	case retry:
		e.Class, e.Retry = Transient, true
	default:
		e.Class = Permanent
	}
	return e
}

// ErrorMessage extracts an error message from the common error shapes:
// {"error":{"message":…}}, {"error":"…"}, {"message":…}.
func ErrorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if len(v.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
	}
	return v.Message
}

// ErrorCode extracts the error code of {"error":{"code":…,"type":…}}: the
// code when it is a string, else the type ("" when neither is).
func ErrorCode(body []byte) string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return ErrorObjectCode(v.Error)
}

// ErrorObjectCode is ErrorCode of the error object itself.
func ErrorObjectCode(raw json.RawMessage) string {
	var e struct {
		Code any    `json:"code"`
		Type string `json:"type"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return ""
	}
	if c, ok := e.Code.(string); ok && c != "" {
		return c
	}
	return e.Type
}

// MaxRetryAfter caps an upstream's Retry-After.
const MaxRetryAfter = 10 * time.Minute

// ParseRetryAfter reads a Retry-After value: delay seconds or an HTTP date
// (relative to now). Zero when absent, invalid or in the past; at most
// MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// TimeoutOr returns b's exchange timeout, else def.
func (b Backend) TimeoutOr(def time.Duration) time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return def
}

// CheckBase fails (Failover, not retried) when the backend has no usable base URL.
func CheckBase(b Backend) *Error {
	if !strings.HasPrefix(b.BaseURL, "http://") && !strings.HasPrefix(b.BaseURL, "https://") {
		return &Error{Class: Failover, Message: fmt.Sprintf("backend %q (%s) has no http(s) baseURL", b.Name, b.Provider)}
	}
	return nil
}

func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}
