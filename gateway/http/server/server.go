// Package server is the gateway's HTTP server: explicit timeouts, health and
// readiness endpoints, graceful shutdown. Endpoint groups mount their handlers
// on its mux.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// ReadyCheck reports whether a dependency is ready; nil means ready.
type ReadyCheck func(ctx context.Context) error

// Options configure a Server.
type Options struct {
	// Addr is the listen address, such as ":8080" or "127.0.0.1:0".
	Addr string
	// ShutdownGrace bounds how long in-flight requests may take to finish.
	ShutdownGrace time.Duration
	// ReadyChecks must all pass for /readyz to answer 200.
	ReadyChecks map[string]ReadyCheck
	// Unmatched answers a request no endpoint matches: status 404 (unknown
	// path) or 405 (known path, other methods; allow lists them and the
	// Allow header is set). Nil: plain text.
	Unmatched func(w http.ResponseWriter, r *http.Request, status int, allow []string)
	Logger    *slog.Logger
}

// Server serves the gateway's API.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	patterns []string
	addr     atomic.Value // the bound address, once listening
	draining atomic.Bool
}

// idleTimeout bounds how long a keep-alive connection waits for its next
// request.
const idleTimeout = 120 * time.Second

// New returns a Server with health endpoints mounted.
func New(opts Options) *Server {
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.Handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.Handle("GET /readyz", http.HandlerFunc(s.readyz))
	// The least specific pattern: only what nothing else matches gets here,
	// so the hot path pays nothing for it.
	s.Handle("/", http.HandlerFunc(s.unmatched))
	return s
}

// methods are the methods a 405 can list.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range methods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: r.Header}
		if _, pattern := s.mux.Handler(probe); m != r.Method && pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	status := http.StatusNotFound
	if len(allow) > 0 {
		status = http.StatusMethodNotAllowed
		w.Header().Set("Allow", strings.Join(allow, ", "))
	}
	if s.opts.Unmatched != nil {
		s.opts.Unmatched(w, r, status, allow)
		return
	}
	http.Error(w, http.StatusText(status), status)
}

// Handle mounts a handler for a pattern of http.ServeMux.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.patterns = append(s.patterns, pattern)
}

// Patterns are the patterns mounted, in order: the API reference
// (gateway/http/openapi) is checked against them.
func (s *Server) Patterns() []string { return slices.Clone(s.patterns) }

// Addr is the address the server listens on, once Run has bound it.
func (s *Server) Addr() string {
	a, _ := s.addr.Load().(string)
	return a
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz is 503 while draining or while any check fails, naming the failure.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.draining.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	for name, check := range s.opts.ReadyChecks {
		if err := check(ctx); err != nil {
			http.Error(w, fmt.Sprintf("%s: not ready: %v", name, err), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Run listens and serves until ctx is done, then stops accepting, lets
// in-flight requests finish within the grace period, and returns.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.opts.Addr, err)
	}
	s.addr.Store(ln.Addr().String())
	srv := &http.Server{
		Handler:           closeAfterChunkedBody(s.mux),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: streams last as long as the model writes. Idle
		// keep-alive connections are bounded instead.
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: 1 << 20,
		BaseContext:    func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		Protocols:      protocols(),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.opts.Logger.Info("gateway listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// closeAfterChunkedBody ends the connection after any HTTP/1.1 request
// whose body came chunked. net/http frames such a request by its
// Transfer-Encoding and drops a Content-Length sent beside it without a
// trace the handler could see; a proxy in front that framed it by the
// length instead would read the rest as a request of its own (request
// smuggling), so RFC 9112 section 6.1 has the server close the connection
// after answering. API clients send their JSON with a length: closing
// costs them nothing.
func closeAfterChunkedBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// protocols are HTTP/1.1 and HTTP/2 without TLS (prior knowledge): a proxy
// or client that speaks h2c carries many streams on one connection.
func protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
