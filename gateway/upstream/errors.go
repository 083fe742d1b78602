package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
)

// Class says what the caller should do about a failed exchange.
type Class int

// The classes.
const (
	// Failover: nothing was accepted (or charged) upstream; the request or
	// task may move to another backend.
	Failover Class = iota + 1
	// Permanent: the upstream refused the request (or lost the task); the
	// client gets the upstream's message.
	Permanent
	// Transient: a task poll failed in a way worth retrying later (network,
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

// Error is a classified upstream failure, of a text call or of a task
// exchange. For a text call it is a failure before any byte reached the
// client.
type Error struct {
	Class Class
	// Status is the upstream's HTTP status. A text call reports 502 for a
	// connection error and 504 for a timeout; a task exchange 0 when there
	// was no answer.
	Status int
	// Message is safe to show to the client (the upstream's own error
	// message, or a description of the transport failure).
	Message string
	// Code is the upstream's error code (or, without one, its error type)
	// when its body names one as a string, or CodePolicy from an adapter
	// that classified the failure itself (tasks); the controller maps it to
	// the task's error code, empty meaning its generic one.
	Code string
	// RetryAfter is the upstream's Retry-After, when it sent one (tasks).
	RetryAfter time.Duration
	// Retryable reports a failure worth trying again: a network failure, a
	// timeout, 408, 429 or 5xx. A text call moves on to the next backend; a
	// task retries the same backend later. Other failures (a configuration
	// problem, an unsupported request, a 4xx) are not.
	Retryable bool
	// Body is the upstream's error body, when there was one (text calls, at
	// most 64 KiB).
	Body []byte
	// Protocol is the protocol a text call spoke with the upstream ("" for
	// a task exchange): an error body in the client's own protocol reaches
	// it as the upstream wrote it.
	Protocol Protocol
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

// ClientStatus is the HTTP status to show the client: the upstream's own,
// except that an upstream authentication or permission failure (the
// gateway's credential, not the client's) and a status below 400 (none, or
// a redirect) become 502.
func (e *Error) ClientStatus() int {
	switch {
	case e.Status < 400, e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden, e.Status == http.StatusProxyAuthRequired:
		return http.StatusBadGateway
	}
	return e.Status
}

// ClientBody renders the error in the client protocol's error shape: the
// upstream's own body when the upstream spoke the client's protocol and
// its status reaches the client (its type, message and any field of its
// own, unchanged), else a body of the shape with the upstream's message.
func (e *Error) ClientBody(p Protocol) []byte {
	if e.Protocol == p && e.ClientStatus() == e.Status && isErrorBody(p, e.Body) {
		return e.Body
	}
	msg := e.Message
	if e.ClientStatus() != e.Status {
		msg = "upstream rejected the gateway's request: " + msg
	}
	return translate.ErrorBody(p, e.ClientStatus(), msg)
}

// As returns err's *Error, if it has one.
func As(err error) (*Error, bool) {
	var ue *Error
	ok := errors.As(err, &ue)
	return ue, ok
}

// IsRetryable reports whether err is an Error worth trying again.
func IsRetryable(err error) bool {
	ue, ok := As(err)
	return ok && ue.Retryable
}

// Classify returns err's *Error; an unclassified error is Transient when it
// looks like a network failure and Permanent otherwise.
func Classify(err error) *Error {
	if ue, ok := As(err); ok {
		return ue
	}
	if isNetwork(err) {
		return &Error{Class: Transient, Message: "the upstream could not be reached", Retryable: true, Err: err}
	}
	return &Error{Class: Permanent, Message: err.Error(), Err: err}
}

// Unsupported is a Failover error for a request this backend cannot serve
// (another backend may).
func Unsupported(format string, args ...any) *Error {
	return &Error{Class: Failover, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody renders an error of the given HTTP status in protocol p's shape;
// handlers use it for their own errors too.
func ErrorBody(p Protocol, status int, message string) []byte {
	return translate.ErrorBody(p, status, message)
}

// RetryableStatus reports whether an upstream HTTP status is worth a retry:
// 408, 429 and 5xx.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// textError is a failed text call: a retryable one moves to the next
// backend (Failover), any other is returned to the client (Permanent).
func textError(status int, retryable bool, msg string, err error) *Error {
	c := Permanent
	if retryable {
		c = Failover
	}
	return &Error{Class: c, Status: status, Retryable: retryable, Message: msg, Err: err}
}

// textStatusError is a text upstream's answer with an error status. A
// redirect (RoundTrip follows none) means the backend's URL is wrong: the
// next backend is tried, and the client sees a 502, never the 3xx.
func textStatusError(status int, body []byte) *Error {
	if status < 400 {
		return textError(status, true, fmt.Sprintf("the upstream answered %d %s, a redirect the gateway does not follow: check the backend's baseURL",
			status, http.StatusText(status)), nil)
	}
	msg, ok := translate.ErrorMessage(body)
	if !ok {
		msg = http.StatusText(status)
	}
	e := textError(status, RetryableStatus(status), msg, nil)
	e.Body = body
	return e
}

// StatusError classifies a task exchange's non-2xx answer. On a submission
// (submit true) nothing was accepted: 429, 408, 5xx and the backend's own
// authentication failures (401, 403, 407) move the task to another
// backend; other 4xx are the request's fault and fail it. On a poll, 429,
// 408 and 5xx are retried later, other 4xx fail the task.
func StatusError(x *Exchange, submit bool, now time.Time) *Error {
	e := &Error{Status: x.Status, Message: ErrorMessage(x.Body), Code: ErrorCode(x.Body),
		RetryAfter: ParseRetryAfter(x.Header.Get("Retry-After"), now)}
	if e.Message == "" {
		e.Message = http.StatusText(x.Status)
	}
	retry := RetryableStatus(x.Status)
	auth := x.Status == http.StatusUnauthorized || x.Status == http.StatusForbidden || x.Status == http.StatusProxyAuthRequired
	switch {
	case submit && retry:
		e.Class, e.Retryable = Failover, true
	case submit && auth:
		e.Class = Failover
		e.Message = "the upstream refused the backend's credential: " + e.Message
	case retry:
		e.Class, e.Retryable = Transient, true
	default:
		e.Class = Permanent
	}
	return e
}

// ErrorMessage extracts an error message from the common error shapes of
// task APIs: {"error":{"message":…}}, {"message":…}, {"error":"…"}; the
// same reading as a text upstream's error (translate.ErrorMessage).
func ErrorMessage(body []byte) string {
	msg, _ := translate.ErrorMessage(body)
	return msg
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

func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// isErrorBody reports whether body is an error in p's shape: the Messages
// API's {"type":"error","error":{"type","message"}}, OpenAI's
// {"error":{"message",…}}.
func isErrorBody(p Protocol, body []byte) bool {
	if _, ok := translate.FieldString(body, "error", "message"); !ok {
		return false
	}
	if p != Messages {
		return true
	}
	typ, _ := translate.FieldString(body, "type")
	_, hasType := translate.FieldString(body, "error", "type")
	return typ == "error" && hasType
}
