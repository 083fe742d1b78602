// Package netguard keeps requests to URLs that tenants, clients or upstreams
// choose (task webhooks, reference images, review assets, upstream output
// downloads) away from internal addresses: loopback, private and link-local
// networks, cloud metadata endpoints and every other range that is not the
// public internet. The address is checked after DNS resolution, on the
// connection actually dialed, so DNS rebinding cannot slip past, and again
// on every redirect. Platform-configured upstream base URLs are not
// tenant-chosen and do not go through it.
package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrForbidden is wrapped by every refusal.
var ErrForbidden = errors.New("address not allowed")

// internal are the ranges that are not the public internet (IANA special-
// purpose registries for IPv4 and IPv6).
var internal = prefixes(
	"0.0.0.0/8",       // "this network", unspecified
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // CGNAT shared address space
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, cloud metadata (169.254.169.254)
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
	"::/128",          // unspecified
	"::1/128",         // loopback
	"64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
	"100::/64",        // discard-only
	"2001::/23",       // IETF protocol assignments (Teredo, ORCHID, ...)
	"2001:db8::/32",   // documentation
	"2002::/16",       // 6to4: embeds an IPv4 address
	"fc00::/7",        // unique local (fd00:ec2::254, the AWS metadata endpoint, is here)
	"fe80::/10",       // link-local
	"fec0::/10",       // site-local (deprecated)
	"ff00::/8",        // multicast
)

// nat64 is the well-known NAT64 prefix: the IPv4 address it embeds decides.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func prefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// Internal reports whether addr is not a public internet address. IPv4-mapped
// IPv6 addresses and NAT64 addresses are judged by the IPv4 address inside.
func Internal(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return true
	}
	if addr.Is6() && nat64.Contains(addr) {
		b := addr.As16()
		return Internal(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, p := range internal {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Guard decides which addresses may be dialed: public ones, plus an
// allow-list for local development and tests. The zero value, and a nil
// *Guard, allow only public addresses. It is safe for concurrent use. The
// composition root makes one per process (from --allow-private-networks)
// and passes it to whatever dials a URL it was given.
type Guard struct {
	mu    sync.RWMutex
	allow []netip.Prefix
}

// Allow adds prefixes to the allow-list.
func (g *Guard) Allow(p ...netip.Prefix) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allow = append(g.allow, p...)
}

// AllowList parses a comma-separated list of CIDRs or addresses and adds it
// (the flag's format).
func (g *Guard) AllowList(list string) error {
	var ps []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("allow-list entry %q: %w", s, err)
			}
			ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("allow-list entry %q: %w", s, err)
		}
		ps = append(ps, p.Masked())
	}
	g.Allow(ps...)
	return nil
}

// AllowLoopback allows 127.0.0.1 and ::1: test stacks whose fake receivers
// and upstreams listen on loopback.
func (g *Guard) AllowLoopback() {
	g.Allow(netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"))
}

// CheckAddr refuses an internal address that the allow-list does not name.
func (g *Guard) CheckAddr(addr netip.Addr) error {
	if !Internal(addr) {
		return nil
	}
	if g == nil {
		return fmt.Errorf("%w: not a public internet address", ErrForbidden)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, p := range g.allow {
		if p.Contains(addr.Unmap()) || p.Contains(addr) {
			return nil
		}
	}
	return fmt.Errorf("%w: not a public internet address", ErrForbidden)
}

// CheckURL refuses a URL that is not plain http(s) to a host, carries
// credentials, or names an internal address literally. Host names are
// checked when dialed (Client), or up front with Resolve.
func (g *Guard) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a valid URL", ErrForbidden)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: only http and https URLs are allowed", ErrForbidden)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: URLs with credentials are not allowed", ErrForbidden)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: the URL has no host", ErrForbidden)
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		host = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if err := g.CheckAddr(a); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolve checks a URL and every address its host resolves to, for an
// up-front verdict (a Tenant condition). The dial-time check still applies:
// a name may resolve differently later.
func (g *Guard) Resolve(ctx context.Context, r Resolver, raw string) error {
	u, err := g.CheckURL(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // checked by CheckURL
	}
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("the host name could not be resolved")
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// control is a net.Dialer Control hook: it runs on the address actually
// being connected to, after DNS resolution.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address", ErrForbidden)
	}
	return g.CheckAddr(ap.Addr())
}

// ClientOptions shape a guarded client.
type ClientOptions struct {
	// Timeout bounds a whole request (0: none; use contexts).
	Timeout time.Duration
	// MaxRedirects followed; 0 follows none (the redirect response is
	// returned as is).
	MaxRedirects int
	// Resolver answers host names (tests inject one); nil uses the system's.
	Resolver Resolver
	// RootCAs verify servers' certificates; nil: the system roots.
	RootCAs *x509.CertPool
}

// Client returns an HTTP client that dials only addresses the guard allows,
// rechecks every redirect target, and ignores proxy environment variables
// (a proxy would dial on its own, past the guard).
func (g *Guard) Client(o ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	resolver := o.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialVia(dialer, resolver),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       60 * time.Second,
	}
	if o.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if o.MaxRedirects == 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("%w: too many redirects", ErrForbidden)
			}
			_, err := g.CheckURL(req.URL.String())
			return err
		},
	}
}

// dialVia resolves the host with r and dials its addresses in turn; the
// dialer's Control hook checks each address as it is connected to.
func dialVia(d *net.Dialer, r Resolver) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		addrs, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, a := range addrs {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("no address for the host")
		}
		return nil, errors.Join(errs...)
	}
}

// Reason is a refusal or transport failure as a short message without the
// URL or any address, for status fields and logs.
func Reason(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrForbidden):
		msg := err.Error()
		if i := strings.Index(msg, ErrForbidden.Error()); i >= 0 {
			msg = msg[i:]
		}
		return msg
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "the server did not answer in time"
	default:
		return "the request failed before an answer"
	}
}
