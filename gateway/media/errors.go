package media

import (
	"fmt"
	"net/http"
)

// Error types of the image task error table used by this package.
const (
	// ErrTypeInvalidRequest is the type of every rejected request body.
	ErrTypeInvalidRequest = "invalid_request"
	// ErrTypeInternal is the type returned when the route's profile is not
	// one this package knows (a configuration error, not the caller's).
	ErrTypeInternal = "internal_error"
)

// ValidationError says why a request body was rejected. Status is the HTTP
// status (400 for bad input), Type the error type of the contract's image
// task error table, Message a sentence naming the field and the rule, and
// Param the JSON path of the offending field ("" when the body as a whole is
// at fault).
type ValidationError struct {
	Status  int    `json:"-"`
	Type    string `json:"type"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// invalid builds a 400 invalid_request error for param.
func invalid(param, format string, args ...any) *ValidationError {
	return &ValidationError{
		Status:  http.StatusBadRequest,
		Type:    ErrTypeInvalidRequest,
		Message: fmt.Sprintf(format, args...),
		Param:   param,
	}
}
