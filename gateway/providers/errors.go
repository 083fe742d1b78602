package providers

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/modelgate/modelgate/gateway/translate"
)

// UpstreamError is a failure before any byte reached the client: the call
// could not be made, timed out, or the upstream answered with an error
// status (or an error event before any content).
type UpstreamError struct {
	// Status is the upstream's HTTP status; 502 for a connection error,
	// 504 for a timeout.
	Status int
	// Retryable: connection errors, timeouts, 408, 429 and 5xx. The caller
	// may try the next backend. Other 4xx are the client's fault and are
	// returned to it.
	Retryable bool
	// Message is the upstream's error message (or a description of the
	// transport failure); safe to show to the client.
	Message string
	// Body is the upstream's error body, when there was one (at most 64 KiB).
	Body []byte
	// Err is the underlying transport error, for logs.
	Err error
}

func (e *UpstreamError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("upstream %d: %s: %v", e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("upstream %d: %s", e.Status, e.Message)
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// ClientStatus is the HTTP status to show the client: the upstream's own,
// except that an upstream authentication or permission failure (the
// gateway's credential, not the client's) becomes 502.
func (e *UpstreamError) ClientStatus() int {
	switch e.Status {
	case 0, http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return http.StatusBadGateway
	}
	return e.Status
}

// ClientBody renders the error in the client protocol's error shape.
func (e *UpstreamError) ClientBody(p Protocol) []byte {
	msg := e.Message
	if e.ClientStatus() != e.Status {
		msg = "upstream rejected the gateway's request: " + msg
	}
	return translate.ErrorBody(p, e.ClientStatus(), msg)
}

// AsUpstreamError returns err's *UpstreamError, if it has one.
func AsUpstreamError(err error) (*UpstreamError, bool) {
	var ue *UpstreamError
	ok := errors.As(err, &ue)
	return ue, ok
}

// IsRetryable reports whether err is an UpstreamError worth retrying on
// another backend.
func IsRetryable(err error) bool {
	ue, ok := AsUpstreamError(err)
	return ok && ue.Retryable
}

// ErrorBody renders an error of the given HTTP status in protocol p's shape;
// handlers use it for their own errors too.
func ErrorBody(p Protocol, status int, message string) []byte {
	return translate.ErrorBody(p, status, message)
}

// RetryableStatus reports whether an upstream HTTP status is worth a retry
// on another backend.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

func statusError(status int, body []byte) *UpstreamError {
	msg, ok := translate.ErrorMessage(body)
	if !ok {
		msg = http.StatusText(status)
	}
	return &UpstreamError{Status: status, Retryable: RetryableStatus(status), Message: msg, Body: body}
}
