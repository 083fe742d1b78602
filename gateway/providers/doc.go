// Package providers is the gateway's upstream side for text generation: one
// Provider interface, a registry of implementations (one package each), and
// Invoke, which sends a client request to a backend and returns the answer in
// the client's protocol with its token usage.
package providers
