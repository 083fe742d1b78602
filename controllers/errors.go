package controllers

import (
	"errors"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// ledgerError marks a failure to reach or update the database: retried.
type ledgerError struct{ err error }

func (e ledgerError) Error() string { return "ledger: " + e.err.Error() }
func (e ledgerError) Unwrap() error { return e.err }

// specError marks a spec the schema accepts but the controller cannot use.
type specError struct{ err error }

func (e specError) Error() string { return e.err.Error() }
func (e specError) Unwrap() error { return e.err }

// reasonFor maps a step's error to a condition reason.
func reasonFor(err error) string {
	var le ledgerError
	var se specError
	switch {
	case errors.As(err, &le):
		return v1.ReasonLedgerUnavailable
	case errors.As(err, &se):
		return v1.ReasonInvalidSpec
	default:
		return v1.ReasonError
	}
}
