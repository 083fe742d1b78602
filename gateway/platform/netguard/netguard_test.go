package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

func TestInternal(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []string{
		"127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "169.254.1.1", "100.64.0.1", "100.127.255.255", "0.0.0.0", "0.1.2.3",
		"224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "192.0.0.8", "198.18.0.1",
		"::", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "2001:db8::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", // IPv4-mapped
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", // NAT64 of 127.0.0.1 and 169.254.169.254
		"2002:7f00:1::1", // 6to4
	} {
		g.Expect(netguard.Internal(netip.MustParseAddr(s))).To(BeTrue(), s)
	}
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "100.128.0.1", "172.32.0.1", "2606:4700::1",
		"::ffff:8.8.8.8", "64:ff9b::808:808"} {
		g.Expect(netguard.Internal(netip.MustParseAddr(s))).To(BeFalse(), s)
	}
}

func TestCheckURL(t *testing.T) {
	g := NewWithT(t)
	guard := &netguard.Guard{}
	for _, raw := range []string{
		"http://127.0.0.1:19400/hook", "http://169.254.169.254/latest/meta-data", "https://[::1]/x",
		"http://[::ffff:10.0.0.1]/", "http://localhost/x", "http://a.localhost/", "ftp://example.com/x",
		"file:///etc/passwd", "http://user:pw@example.com/", "http:///path", "://bad",
	} {
		_, err := guard.CheckURL(raw)
		g.Expect(err).To(MatchError(netguard.ErrForbidden), raw)
		g.Expect(netguard.Reason(err)).NotTo(ContainSubstring("127.0.0.1"), "no address in the reason")
	}
	for _, raw := range []string{"https://example.com/hook", "http://93.184.216.34:8080/x", "https://[2606:4700::1]/"} {
		_, err := guard.CheckURL(raw)
		g.Expect(err).NotTo(HaveOccurred(), raw)
	}

	guard.AllowLoopback()
	_, err := guard.CheckURL("http://127.0.0.1:19400/hook")
	g.Expect(err).NotTo(HaveOccurred(), "the allow-list admits loopback")
	_, err = guard.CheckURL("http://10.0.0.1/")
	g.Expect(err).To(MatchError(netguard.ErrForbidden), "but nothing else")
}

func TestAllowList(t *testing.T) {
	g := NewWithT(t)
	guard := &netguard.Guard{}
	g.Expect(guard.AllowList("10.0.0.0/8, 192.168.1.7 ,::1")).To(Succeed())
	g.Expect(guard.CheckAddr(netip.MustParseAddr("10.9.9.9"))).To(Succeed())
	g.Expect(guard.CheckAddr(netip.MustParseAddr("::ffff:10.9.9.9"))).To(Succeed())
	g.Expect(guard.CheckAddr(netip.MustParseAddr("192.168.1.7"))).To(Succeed())
	g.Expect(guard.CheckAddr(netip.MustParseAddr("192.168.1.8"))).To(MatchError(netguard.ErrForbidden))
	g.Expect(guard.CheckAddr(netip.MustParseAddr("::1"))).To(Succeed())
	g.Expect(guard.AllowList("not-a-cidr")).NotTo(Succeed())
}

// The client checks the address it actually dials: a public-looking name
// that resolves to loopback (DNS rebinding) is refused before any byte is
// sent, and so is a redirect from an allowed server to a forbidden one.
func TestClientChecksTheDialedAddressAndRedirects(t *testing.T) {
	g := NewWithT(t)
	hits := 0
	internalSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits++ }))
	defer internalSrv.Close()
	port := internalSrv.Listener.Addr().(*net.TCPAddr).Port

	// A resolver that answers every name with 127.0.0.1 (a rebinding DNS server).
	guard := &netguard.Guard{}
	c := guard.Client(netguard.ClientOptions{Resolver: fixedResolver{"127.0.0.1"}, MaxRedirects: 3})
	_, err := c.Get("http://public.example.com:" + strconv.Itoa(port) + "/")
	g.Expect(err).To(MatchError(netguard.ErrForbidden))
	g.Expect(hits).To(BeZero(), "nothing reached the internal server")
	g.Expect(netguard.Reason(err)).To(Equal("address not allowed: not a public internet address"))

	// An allowed server that redirects to an internal address.
	allowed := &netguard.Guard{}
	allowed.Allow(netip.MustParsePrefix("127.0.0.2/32"))
	redirector := httptest.NewUnstartedServer(http.RedirectHandler(internalSrv.URL+"/meta", http.StatusFound))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 is not usable here: %v", err)
	}
	redirector.Listener = ln
	redirector.Start()
	defer redirector.Close()
	_, err = allowed.Client(netguard.ClientOptions{MaxRedirects: 3}).Get(redirector.URL)
	g.Expect(err).To(MatchError(netguard.ErrForbidden))
	g.Expect(hits).To(BeZero(), "the redirect target was refused")

	resp, err := allowed.Client(netguard.ClientOptions{}).Get(redirector.URL)
	g.Expect(err).NotTo(HaveOccurred(), "without redirects the 302 itself is the answer")
	g.Expect(resp.StatusCode).To(Equal(http.StatusFound))
	_ = resp.Body.Close()
}

func TestResolve(t *testing.T) {
	g := NewWithT(t)
	guard := &netguard.Guard{}
	err := guard.Resolve(context.Background(), fixedResolver{"93.184.216.34", "10.0.0.7"}, "https://hooks.example.com/x")
	g.Expect(err).To(MatchError(netguard.ErrForbidden))
	g.Expect(err.Error()).NotTo(ContainSubstring("10.0.0.7"))
}

// fixedResolver answers every name with the same addresses.
type fixedResolver []string

func (f fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range f {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// A nil *Guard is what a component gets when nobody passed it the process's
// guard: it must fail closed (public addresses only), never open.
func TestNilGuardAllowsPublicAddressesOnly(t *testing.T) {
	var g *netguard.Guard
	if err := g.CheckAddr(netip.MustParseAddr("8.8.8.8")); err != nil {
		t.Fatalf("public address refused: %v", err)
	}
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "::1"} {
		if err := g.CheckAddr(netip.MustParseAddr(a)); !errors.Is(err, netguard.ErrForbidden) {
			t.Errorf("%s: %v, want ErrForbidden", a, err)
		}
	}
	if _, err := g.CheckURL("http://localhost:8080/x"); !errors.Is(err, netguard.ErrForbidden) {
		t.Errorf("localhost URL: %v, want ErrForbidden", err)
	}
}
