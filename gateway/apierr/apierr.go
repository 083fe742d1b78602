// Package apierr writes error bodies in the contract's shapes, one small
// writer per shape, so handlers never build error JSON by hand, and holds
// the one HTTP-status → error-type table of each protocol family (types.go),
// used for the gateway's own errors and for relayed upstream errors alike.
//
// Shapes (spec "Errors"):
//
//	Messages  {type:"error", error:{type, message}}                      /v1/messages
//	OpenAI    {error:{message, type, param, code}}                       chat completions, responses (OpenAI's own shape)
//	Common    {error:{code:<HTTP status>, message, type}}                 common gateway errors, task queries
//	Usage     {success:false, error:{code, message}}                     /api/usage/tokens/*
//	Simple    {success:false, message}                                   tokens, balance, uploads
//	Pricing   {error:{code, message, type}}                              /v1/pricing
package apierr

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

func write(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// RetryAfter sets the Retry-After header in whole seconds (at least 1).
func RetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(d.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

// Messages writes the messages protocol's error (Anthropic's shape).
func Messages(w http.ResponseWriter, status int, typ, message string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	write(w, status, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, message}})
}

// OpenAI writes OpenAI's error shape; code may be empty (null).
func OpenAI(w http.ResponseWriter, status int, typ, code, message string) {
	OpenAIParam(w, status, typ, code, "", message)
}

// OpenAIParam writes OpenAI's error shape naming the request parameter at
// fault; code and param may be empty (null).
func OpenAIParam(w http.ResponseWriter, status int, typ, code, param, message string) {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: message, Type: typ}
	if code != "" {
		d.Code = &code
	}
	if param != "" {
		d.Param = &param
	}
	write(w, status, struct {
		Error detail `json:"error"`
	}{d})
}

// Common writes the contract's common gateway error: code is the HTTP status.
func Common(w http.ResponseWriter, status int, typ, message string) {
	type detail struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	write(w, status, struct {
		Error detail `json:"error"`
	}{detail{status, message, typ}})
}

// Usage writes the usage endpoints' error.
func Usage(w http.ResponseWriter, status int, code, message string) {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	write(w, status, struct {
		Success bool   `json:"success"`
		Error   detail `json:"error"`
	}{false, detail{code, message}})
}

// Simple writes {success:false, message} (tokens, balance, uploads).
func Simple(w http.ResponseWriter, status int, message string) {
	write(w, status, struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}{false, message})
}

// Pricing writes the pricing endpoint's error: a code plus a type.
func Pricing(w http.ResponseWriter, status int, code, message string) {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	write(w, status, struct {
		Error detail `json:"error"`
	}{detail{code, message, code}})
}
