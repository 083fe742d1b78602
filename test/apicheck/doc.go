// Package apicheck validates the gateway's answers against its OpenAPI
// document (gateway/http/openapi): tests use it, the gateway never does.
package apicheck
