package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/wire"
)

// The retention flags take days or Go durations, default to the documented
// retentions and refuse what is not a retention.
func TestRetentionFlags(t *testing.T) {
	parse := func(args ...string) (housekeeping.Keeper, error) {
		var k housekeeping.Keeper
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		registerHousekeeping(fs, &k)
		return k, fs.Parse(args)
	}
	g := NewWithT(t)
	k, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.Retention).To(Equal(housekeeping.DefaultRetention()))
	g.Expect(k.Retention.Usage).To(Equal(400 * 24 * time.Hour))
	g.Expect(k.Retention.Responses).To(Equal(30 * 24 * time.Hour))

	k, err = parse("--retention-usage=90d", "--retention-responses=12h", "--retention-reservations=0", "--retention-tasks=1d")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.Retention.Usage).To(Equal(90 * 24 * time.Hour))
	g.Expect(k.Retention.Responses).To(Equal(12 * time.Hour))
	g.Expect(k.Retention.Reservations).To(BeZero(), "0 keeps them forever")
	g.Expect(k.Retention.Tasks).To(Equal(24 * time.Hour))

	for _, bad := range []string{"-1d", "1.5d", "-3h", "soon"} {
		_, err = parse("--retention-usage=" + bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	d := days(400 * 24 * time.Hour)
	g.Expect(d.String()).To(Equal("400d"))
	d = days(90 * time.Minute)
	g.Expect(d.String()).To(Equal("1h30m0s"))
}

// --upstream-ca-file adds a private CA to the roots the upstream client
// verifies with: an upstream whose certificate chains to it is reached
// over HTTPS and HTTP/2, the same upstream without the flag is refused,
// and a file without a certificate fails at start.
func TestUpstreamCAFile(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "HTTP/%d", r.ProtoMajor)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)).To(Succeed())
	notPEM := filepath.Join(dir, "not.pem")
	g.Expect(os.WriteFile(notPEM, []byte("not a certificate"), 0o600)).To(Succeed())

	client := func(args ...string) (*http.Client, error) {
		var e egressFlags
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		e.register(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		o := e.options(wire.SystemOptions{})
		return upstream.NewEgress(upstream.EgressOptions{RootCAs: o.UpstreamRootCAs}).API, nil
	}
	get := func(c *http.Client) (string, error) {
		resp, err := c.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	trusted, err := client("--upstream-ca-file", caFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(trusted)).To(Equal("HTTP/2"))

	plain, err := client()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = get(plain)
	var unknown x509.UnknownAuthorityError
	g.Expect(errors.As(err, &unknown)).To(BeTrue(), "without the flag the private CA is not trusted: %v", err)

	_, err = client("--upstream-ca-file", notPEM)
	g.Expect(err).To(MatchError(ContainSubstring("holds no PEM certificate")))
	_, err = client("--upstream-ca-file", filepath.Join(dir, "missing.pem"))
	g.Expect(err).To(HaveOccurred())
}

// The --console-oidc-* flags reach wire.Options.ConsoleOIDC on the
// gateway's flag set (which dev shares): the secret is read from its file
// and trimmed, an empty file fails at start, and without an issuer OIDC is
// off.
func TestConsoleOIDCFlags(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	g.Expect(os.WriteFile(secret, []byte("s3cret\n"), 0o600)).To(Succeed())
	empty := filepath.Join(dir, "empty")
	g.Expect(os.WriteFile(empty, []byte("\n"), 0o600)).To(Succeed())
	parse := func(args ...string) (wire.Options, error) {
		var gf gatewayFlags
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		gf.register(fs, ":8080")
		err := fs.Parse(args)
		return gf.options(dir), err
	}

	o, err := parse("--console-oidc-issuer", "https://login.example.com/realms/acme", "--console-oidc-client-id", "modelgate-console",
		"--console-oidc-client-secret-file", secret, "--console-oidc-groups-claim", "roles", "--console-platform-admin-group", "ops",
		"--console-oidc-redirect-url", "https://gw.example.com/console/oidc/callback")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.ConsoleOIDC).To(Equal(console.OIDC{Issuer: "https://login.example.com/realms/acme", ClientID: "modelgate-console",
		ClientSecret: "s3cret", GroupsClaim: "roles", PlatformAdminGroup: "ops", RedirectURL: "https://gw.example.com/console/oidc/callback"}))
	g.Expect(o.ConsoleOIDC.Validate()).To(Succeed())

	o, err = parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.ConsoleOIDC.Enabled()).To(BeFalse())
	g.Expect(o.ConsoleOIDC.GroupsClaim).To(Equal(console.DefaultGroupsClaim))

	_, err = parse("--console-oidc-client-secret-file", empty)
	g.Expect(err).To(MatchError(ContainSubstring("is empty")))
	o, err = parse("--console-oidc-issuer", "https://login.example.com")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.ConsoleOIDC.Validate()).To(MatchError(ContainSubstring("client ID")))
	o, err = parse("--console-oidc-issuer", "login.example.com", "--console-oidc-client-id", "c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.ConsoleOIDC.Validate()).To(MatchError(ContainSubstring("not an http(s) URL")))
}

func TestBatchFileMaxFlag(t *testing.T) {
	g := NewWithT(t)
	parse := func(args ...string) wire.Options {
		var gf gatewayFlags
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		gf.register(fs, ":8080")
		g.Expect(fs.Parse(args)).To(Succeed())
		return gf.options(t.TempDir())
	}
	g.Expect(parse().BatchFileMaxBytes).To(Equal(int64(files.DefaultMaxBytes)), "OpenAI's 200 MB by default")
	g.Expect(parse("--batch-file-max-mb", "16").BatchFileMaxBytes).To(Equal(int64(16 << 20)))
}
