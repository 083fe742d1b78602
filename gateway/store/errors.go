package store

import (
	"errors"
	"fmt"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors the gateway and controllers branch on. Every returned error wraps one
// of these or carries database context.
var (
	// ErrNotFound: the tenant, token or reservation does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInsufficientQuota: the token, its tenant, or the token's daily or
	// monthly window cannot cover the amount. Maps to HTTP 402/429.
	ErrInsufficientQuota = errors.New("insufficient quota")
	// ErrTokenDisabled: the token was deleted (or its tenant was); it
	// reserves nothing more. It wraps ErrInsufficientQuota, so a request
	// that races the deletion is refused like one without quota.
	ErrTokenDisabled = fmt.Errorf("%w: the key was deleted", ErrInsufficientQuota)
	// ErrReservationClosed: settling a refunded reservation or refunding a
	// settled one.
	ErrReservationClosed = errors.New("reservation already closed")
	// ErrConflict: an idempotent create was repeated with different identity
	// (a token UID re-used for another tenant).
	ErrConflict = errors.New("conflicting ledger state")
	// ErrInvalidQuery: a usage query outside the contract's limits (window,
	// page size). Maps to 422 invalid_query.
	ErrInvalidQuery = errors.New("invalid query")
	// ErrInvalidCursor: a cursor that was tampered with or produced by another
	// endpoint, window or token filter. Maps to 422 invalid_query.
	// It wraps ErrInvalidQuery.
	ErrInvalidCursor = fmt.Errorf("%w: cursor not valid for this query", ErrInvalidQuery)
	// ErrQueryTimeout: a usage query exceeded the query timeout. Maps to 503
	// query_timeout.
	ErrQueryTimeout = errors.New("query timeout")
)

// isUniqueViolation reports whether err is SQLite refusing a row whose
// unique key is present.
func isUniqueViolation(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}
