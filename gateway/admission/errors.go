package admission

import (
	"net/http"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Reason is why a request was refused. Each protocol family renders it in
// its own shape; the text protocols send it as the error code where it
// names one.
type Reason string

// The refusals, in the order Admit checks them.
const (
	ModelNotAllowed     Reason = "model_not_allowed"
	ModelNotFound       Reason = "model_not_found"
	WrongFamily         Reason = "wrong_family"
	UnsupportedEndpoint Reason = "unsupported_endpoint"
	// Invalid is a subject's own check (max_tokens over the route's cap,
	// a media body its validation profile refuses).
	Invalid            Reason = "invalid_request"
	NoBackend          Reason = "no_available_backend"
	RateLimited        Reason = "rate_limit_exceeded"
	PricingUnavailable Reason = "pricing_unavailable"
	Unpriceable        Reason = "unpriceable"
	InsufficientQuota  Reason = "insufficient_quota"
	// Unavailable: the ledger or another dependency failed; retry later.
	Unavailable Reason = "unavailable"
	Internal    Reason = "internal"
)

// Error is a refusal.
type Error struct {
	Reason Reason
	// Status is the HTTP status; a family may answer another for some
	// reasons (insufficient quota: 400 Anthropic, 429 OpenAI, 402 tasks).
	Status  int
	Message string
	// Type is the contract's error type when the check that refused knows
	// it (media validation); empty otherwise.
	Type string
	// RetryAfter is the wait a rate-limit refusal advises.
	RetryAfter time.Duration
	// ModelType is the route's model type of a WrongFamily refusal.
	ModelType v1.ModelType
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Message }

// Code is the error code the text protocols send: the reason where it
// names a condition a client can act on, empty for generic failures.
func (e *Error) Code() string {
	switch e.Reason {
	case Invalid, Unpriceable, Unavailable, Internal:
		return ""
	case WrongFamily:
		return string(ModelNotFound)
	}
	return string(e.Reason)
}

// statusOf is each reason's status.
var statusOf = map[Reason]int{
	ModelNotAllowed:     http.StatusForbidden,
	ModelNotFound:       http.StatusNotFound,
	WrongFamily:         http.StatusBadRequest,
	UnsupportedEndpoint: http.StatusBadRequest,
	Invalid:             http.StatusBadRequest,
	NoBackend:           http.StatusServiceUnavailable,
	RateLimited:         http.StatusTooManyRequests,
	PricingUnavailable:  http.StatusServiceUnavailable,
	Unpriceable:         http.StatusInternalServerError,
	InsufficientQuota:   http.StatusPaymentRequired,
	Unavailable:         http.StatusServiceUnavailable,
	Internal:            http.StatusInternalServerError,
}

// Refuse makes a refusal with its reason's status.
func Refuse(r Reason, message string) *Error {
	return &Error{Reason: r, Status: statusOf[r], Message: message}
}

// InvalidWith is a subject's check refusing the request with a status
// and the contract's error type of its own.
func InvalidWith(status int, typ, message string) *Error {
	return &Error{Reason: Invalid, Status: status, Type: typ, Message: message}
}
