// Package bench is modelgate's load harness: a fast fake OpenAI-compatible
// upstream, a bounded concurrent load driver, and helpers that start the
// whole stack and load it with many tokens and routes. cmd/loadbench runs it
// (make bench); docs/performance.md has the figures.
package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// UpstreamOptions configure the fake upstream.
type UpstreamOptions struct {
	// Chunks is the number of content chunks of a streamed answer (default 20).
	Chunks int
	// ChunkDelay is slept between streamed chunks (default 0).
	ChunkDelay time.Duration
	// Latency is slept before answering (default 0: as fast as possible).
	Latency time.Duration
	// Addr is where it listens (default 127.0.0.1:0, a free port).
	Addr string
	// CertFile, when set, makes it serve HTTPS (HTTP/2 offered by ALPN, as
	// the vendors' APIs are) with a certificate of its own, written to
	// CertFile in PEM for the clients to trust (SSL_CERT_FILE).
	CertFile string
}

// Upstream is a minimal OpenAI-compatible chat completions server on
// loopback. Answers are canned and pre-encoded: the request body is only
// scanned for `"stream":true`, so the upstream costs as little as possible
// and the figures measure the proxy in front of it.
type Upstream struct {
	URL  string // http://127.0.0.1:port (no path)
	srv  *http.Server
	opts UpstreamOptions

	completion []byte
	chunk      map[bool][]byte // by whether usage was asked for
	final      map[bool][]byte // finish chunk, usage chunk, [DONE]
	bufs       sync.Pool
	hold       atomic.Pointer[chan struct{}] // see Hold
}

// Hold makes every stream that starts from now on stop after its first
// chunk until release is called (or its client leaves): slow streams that
// cost the upstream nothing while the proxy in front keeps them open.
func (u *Upstream) Hold() (release func()) {
	ch := make(chan struct{})
	u.hold.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			u.hold.Store(nil)
			close(ch)
		})
	}
}

// Canned usage of every answer; the gateway bills it.
const (
	PromptTokens     = 12
	CompletionTokens = 20
)

var (
	streamTrue   = []byte(`"stream":true`)
	includeUsage = []byte(`"include_usage":true`)
)

// StartUpstream listens on o.Addr and serves until Close.
func StartUpstream(o UpstreamOptions) (*Upstream, error) {
	if o.Chunks <= 0 {
		o.Chunks = 20
	}
	u := &Upstream{opts: o, chunk: map[bool][]byte{}, final: map[bool][]byte{}}
	u.completion = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! This is a canned answer from the benchmark upstream."},` +
		`"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":` + strconv.Itoa(PromptTokens) + `,"completion_tokens":` + strconv.Itoa(CompletionTokens) +
		`,"total_tokens":` + strconv.Itoa(PromptTokens+CompletionTokens) + `}}`)
	usageChunk := "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-model\"," +
		"\"choices\":[],\"usage\":{\"prompt_tokens\":" + strconv.Itoa(PromptTokens) + ",\"completion_tokens\":" +
		strconv.Itoa(CompletionTokens) + ",\"total_tokens\":" + strconv.Itoa(PromptTokens+CompletionTokens) + "}}\n\n" +
		"data: [DONE]\n\n"
	// Asked for usage (stream_options.include_usage, which the gateway always
	// asks for), OpenAI ends every chunk with "usage":null and sends the
	// counts in a last chunk of their own; this upstream sends that last
	// chunk either way.
	for _, withUsage := range []bool{false, true} {
		usage := ""
		if withUsage {
			usage = `,"usage":null`
		}
		u.chunk[withUsage] = []byte("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-model\"," +
			"\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word \"},\"finish_reason\":null}]" + usage + "}\n\n")
		u.final[withUsage] = []byte("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-model\"," +
			"\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]" + usage + "}\n\n" + usageChunk)
	}
	u.bufs.New = func() any { return new(bytes.Buffer) }
	ln, err := net.Listen("tcp", cmp.Or(o.Addr, "127.0.0.1:0"))
	if err != nil {
		return nil, err
	}
	u.URL = "http://" + ln.Addr().String()
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if o.CertFile != "" {
		return u, u.serveTLS(ln, o.CertFile)
	}
	go func() {
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("fake upstream: %v", err))
		}
	}()
	return u, nil
}

// serveTLS serves HTTPS on ln with net/http/httptest's certificate for
// 127.0.0.1, offering HTTP/2 and HTTP/1.1, and writes the certificate to
// certFile in PEM for the clients to trust (SSL_CERT_FILE).
func (u *Upstream) serveTLS(ln net.Listener, certFile string) error {
	ts := httptest.NewUnstartedServer(u)
	_ = ts.Listener.Close()
	ts.Listener, ts.Config = ln, u.srv
	ts.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	ts.StartTLS()
	u.URL = ts.URL
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600)
}

// Close stops the upstream.
func (u *Upstream) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return u.srv.Shutdown(ctx)
}

// ServeHTTP answers POST .../chat/completions (any prefix), JSON or SSE.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	buf := u.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	stream := bytes.Contains(buf.Bytes(), streamTrue)
	withUsage := bytes.Contains(buf.Bytes(), includeUsage)
	u.bufs.Put(buf)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if u.opts.Latency > 0 {
		time.Sleep(u.opts.Latency)
	}
	h := w.Header()
	if !stream {
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(u.completion))}
		_, _ = w.Write(u.completion)
		return
	}
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	fl, _ := w.(http.Flusher)
	hold := u.hold.Load()
	for i := 0; i < u.opts.Chunks; i++ {
		if _, err := w.Write(u.chunk[withUsage]); err != nil {
			return
		}
		if fl != nil {
			fl.Flush() // a real model flushes every token
		}
		if i == 0 && hold != nil {
			select {
			case <-*hold:
			case <-r.Context().Done():
				return
			}
		}
		if u.opts.ChunkDelay > 0 {
			time.Sleep(u.opts.ChunkDelay)
		}
	}
	_, _ = w.Write(u.final[withUsage])
}

// ReverseProxyTransport is the baseline proxy's upstream transport.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// As the gateway's transport: HTTP/2 where a TLS upstream offers it.
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1000,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// NewClient is a keep-alive load-generator client for loopback targets.
func NewClient() *http.Client {
	return &http.Client{Transport: newTransport(), Timeout: 60 * time.Second}
}

// discard reads a body to the end through buf and returns its last bytes
// (enough to check a stream's closing [DONE]).
func discard(body io.Reader, buf []byte, tail []byte) ([]byte, int64, error) {
	tail = tail[:0]
	var n int64
	for {
		m, err := body.Read(buf)
		n += int64(m)
		if m > 0 {
			tail = append(tail, buf[:m]...)
			if len(tail) > 64 {
				tail = append(tail[:0], tail[len(tail)-32:]...)
			}
		}
		if err == io.EOF {
			return tail, n, nil
		}
		if err != nil {
			return tail, n, err
		}
	}
}
