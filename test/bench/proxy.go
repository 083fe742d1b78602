package bench

import (
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// ReverseProxy is the baseline: a bare net/http/httputil.ReverseProxy in
// front of the upstream (MaxIdleConnsPerHost 1000), the floor for any Go
// proxy. It does no auth, routing, billing or logging.
type ReverseProxy struct {
	URL string
	srv *http.Server
}

// StartReverseProxy listens on 127.0.0.1:0 and forwards everything to target.
func StartReverseProxy(target string) (*ReverseProxy, error) {
	return StartReverseProxyOn("127.0.0.1:0", target)
}

// StartReverseProxyOn is StartReverseProxy listening on addr.
func StartReverseProxyOn(addr, target string) (*ReverseProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: newTransport(),
		// text/event-stream responses are flushed at once by ReverseProxy.
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// HTTP/2 without TLS too, as the gateway serves it.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	p := &ReverseProxy{URL: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, Protocols: protocols}}
	go func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return p, nil
}

// Close stops the proxy.
func (p *ReverseProxy) Close() error { return p.srv.Close() }
