// Package upstream is the gateway's one framework for upstream model APIs, text and media: backend, HTTP client, endpoint joining, classified errors, and a registry of adapters by capability.
package upstream
