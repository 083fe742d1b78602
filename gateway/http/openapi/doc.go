// Package openapi holds the gateway's OpenAPI 3.1 document and serves it at
// GET /openapi.json.
package openapi
