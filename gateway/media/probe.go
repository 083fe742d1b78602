package media

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // register the jpeg decoder for image.DecodeConfig
	_ "image/png"  // register the png decoder for image.DecodeConfig
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

// Defaults of HTTPImageProbe.
const (
	DefaultProbeMaxBytes = MultiImageRefMaxBytes
	DefaultProbeTimeout  = 15 * time.Second
	probeMaxRedirects    = 3
)

// ErrAddressNotAllowed is returned by HTTPImageProbe for a URL that resolves
// to a loopback, private, link-local or otherwise internal address.
var ErrAddressNotAllowed = netguard.ErrForbidden

// redactedError carries a message without addresses and still matches err
// with errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// HTTPImageProbe fetches an image over HTTP(S) and reports its size and
// format. It reads the image header with image.DecodeConfig (png and jpeg;
// other formats are named from their content sniffing with zero width and
// height) and counts the body up to MaxBytes+1, so memory use stays small.
// Probe is an ImageProbe:
//
//	opts := media.Options{ImageProbe: (&media.HTTPImageProbe{}).Probe}
type HTTPImageProbe struct {
	// Client performs the requests. When nil a client is built that refuses
	// to connect to internal addresses (unless AllowPrivateNetworks) and
	// follows at most 3 http(s) redirects. A caller-supplied client is used
	// as is.
	Client *http.Client
	// MaxBytes caps how many bytes are read (default 10MB); a larger image
	// is reported with a size above the cap.
	MaxBytes int64
	// Timeout bounds one probe (default 15 s).
	Timeout time.Duration
	// AllowPrivateNetworks lets the default client reach loopback and private
	// addresses (tests, or trusted in-cluster object stores).
	AllowPrivateNetworks bool
	// Guard decides which addresses the default client may dial otherwise
	// (the process's --allow-private-networks); nil: public ones only.
	Guard *netguard.Guard
	// UserAgent is sent when set.
	UserAgent string
	// LocalPrefix and Local serve URLs that start with LocalPrefix() in
	// process: the gateway's own signed file links (uploaded reference
	// images), which live on an address the private-network guard refuses
	// and need no network round trip. Local checks the link's signature
	// as it does for any client.
	LocalPrefix func() string
	Local       http.Handler

	once sync.Once
	dflt *http.Client
}

// Probe implements ImageProbe.
func (p *HTTPImageProbe) Probe(ctx context.Context, rawURL string) (width, height int, format string, size int64, err error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, 0, "", 0, errors.New("not an http or https URL")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	maxBytes := p.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultProbeMaxBytes
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, 0, "", 0, err
	}
	if p.UserAgent != "" {
		req.Header.Set("User-Agent", p.UserAgent)
	}
	resp, err := p.client().Do(req)
	if err != nil {
		// Reason, not err: a dial error names the address the URL resolved
		// to, and this message goes back to the client.
		msg := "download failed: " + netguard.Reason(err)
		if errors.Is(err, ErrAddressNotAllowed) {
			return 0, 0, "", 0, redactedError{msg: msg, err: ErrAddressNotAllowed}
		}
		return 0, 0, "", 0, errors.New(msg)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, "", 0, fmt.Errorf("download failed: HTTP %d", resp.StatusCode)
	}

	counter := &countingReader{r: io.LimitReader(resp.Body, maxBytes+1)}
	br := bufio.NewReaderSize(counter, 4096)
	head, peekErr := br.Peek(512)
	if len(head) == 0 {
		if peekErr != nil && !errors.Is(peekErr, io.EOF) {
			return 0, 0, "", 0, fmt.Errorf("download failed: %w", peekErr)
		}
		return 0, 0, "", 0, errors.New("the image is empty")
	}
	sniffed := sniffFormat(head)
	cfg, decFormat, decErr := image.DecodeConfig(br)
	if decErr == nil {
		width, height, format = cfg.Width, cfg.Height, decFormat
	} else {
		if sniffed == "png" || sniffed == "jpeg" {
			return 0, 0, sniffed, 0, fmt.Errorf("invalid %s image: %v", sniffed, decErr)
		}
		format = sniffed
	}
	if resp.ContentLength > maxBytes {
		return width, height, format, resp.ContentLength, nil
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return 0, 0, format, 0, fmt.Errorf("download failed: %w", err)
	}
	return width, height, format, counter.n, nil
}

func (p *HTTPImageProbe) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	p.once.Do(func() {
		p.dflt = p.newClient()
		if p.Local != nil && p.LocalPrefix != nil {
			p.dflt.Transport = &localTransport{prefix: p.LocalPrefix, handler: p.Local, next: p.dflt.Transport}
		}
	})
	return p.dflt
}

// localTransport answers requests under prefix() from handler, streaming
// the body through a pipe, and sends the rest to next.
type localTransport struct {
	prefix  func() string
	handler http.Handler
	next    http.RoundTripper
}

func (t *localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	prefix := t.prefix()
	if prefix == "" || !strings.HasPrefix(req.URL.String(), prefix) {
		return t.next.RoundTrip(req)
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, started: make(chan struct{})}
	go func() {
		defer func() { _ = pw.Close() }()
		t.handler.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
	}()
	select {
	case <-w.started:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	resp := &http.Response{StatusCode: w.status, Status: http.StatusText(w.status), Header: w.sent, Body: pr,
		ContentLength: -1, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	return resp, nil
}

// pipeResponse is an http.ResponseWriter whose body is read from a pipe.
type pipeResponse struct {
	header  http.Header
	sent    http.Header
	body    *io.PipeWriter
	status  int
	once    sync.Once
	started chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone() // the response owns this copy; later handler writes cannot race it
		close(w.started)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush starts the response; the pipe delivers every write at once anyway.
func (w *pipeResponse) Flush() { w.WriteHeader(http.StatusOK) }

func (p *HTTPImageProbe) newClient() *http.Client {
	if !p.AllowPrivateNetworks {
		return p.Guard.Client(netguard.ClientOptions{MaxRedirects: probeMaxRedirects})
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 15 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > probeMaxRedirects {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errors.New("redirect to a non-http URL")
			}
			return nil
		},
	}
}

// sniffFormat names an image format from its first bytes ("" when unknown).
func sniffFormat(head []byte) string {
	ct := http.DetectContentType(head)
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if sub, ok := strings.CutPrefix(ct, "image/"); ok {
		return strings.TrimPrefix(sub, "x-")
	}
	switch {
	case len(head) >= 12 && string(head[4:8]) == "ftyp" && (string(head[8:12]) == "avif" || string(head[8:12]) == "heic"):
		return string(head[8:12])
	}
	return "unknown"
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
