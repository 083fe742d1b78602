package deploy

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmTemplateConsoleOIDC: gateway.console.oidc turns the console's
// OpenID Connect sign-in on with its flags, the client secret mounted as a
// file from the named Secret (that key only, read-only); off by default, no
// flag and no volume; on, it refuses a missing issuer or client ID, and
// several replicas without the shared signing key its cookies need.
func TestHelmTemplateConsoleOIDC(t *testing.T) {
	g := NewWithT(t)
	const mount = "/etc/modelgate/console-oidc"
	oidcArgs := func(d *unstructured.Unstructured) []string {
		var out []string
		args, _ := container(d)["args"].([]any)
		for _, a := range args {
			if s := a.(string); strings.HasPrefix(s, "--console-oidc-") || strings.HasPrefix(s, "--console-platform-") {
				out = append(out, s)
			}
		}
		return out
	}
	volume := func(d *unstructured.Unstructured, name string) map[string]any {
		vs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		for _, v := range vs {
			if v := v.(map[string]any); v["name"] == name {
				return v
			}
		}
		return nil
	}
	mounts := func(d *unstructured.Unstructured) []any {
		m, _ := container(d)["volumeMounts"].([]any)
		return m
	}

	gw := find(helmTemplate(t), "Deployment", "modelgate-gateway")
	g.Expect(gw).NotTo(BeNil())
	g.Expect(oidcArgs(gw)).To(BeEmpty(), "off by default")
	g.Expect(volume(gw, "console-oidc")).To(BeNil())

	on := []string{"--set", "gateway.console.oidc.enabled=true",
		"--set", "gateway.console.oidc.issuer=https://login.example.com/realms/platform",
		"--set", "gateway.console.oidc.clientID=modelgate-console",
		"--set", "gateway.console.oidc.clientSecret.existingSecret=console-oidc",
		"--set", "gateway.console.oidc.redirectURL=https://api.example.com/console/oidc/callback",
		"--set", "gateway.console.oidc.groupsClaim=roles",
		"--set", "gateway.console.oidc.platformAdminGroup=platform-admins",
		"--set", "blobs.signingKey.existingSecret=modelgate-blobs"}
	objs := helmTemplate(t, on...)
	gw = find(objs, "Deployment", "modelgate-gateway")
	g.Expect(gw).NotTo(BeNil())
	g.Expect(oidcArgs(gw)).To(Equal([]string{
		"--console-oidc-issuer=https://login.example.com/realms/platform",
		"--console-oidc-client-id=modelgate-console",
		"--console-oidc-client-secret-file=" + mount + "/client-secret",
		"--console-oidc-redirect-url=https://api.example.com/console/oidc/callback",
		"--console-oidc-groups-claim=roles",
		"--console-platform-admin-group=platform-admins",
	}))
	g.Expect(volume(gw, "console-oidc")).To(Equal(map[string]any{"name": "console-oidc", "secret": map[string]any{
		"secretName": "console-oidc", "defaultMode": float64(0o400),
		"items": []any{map[string]any{"key": "client-secret", "path": "client-secret"}}}}))
	g.Expect(mounts(gw)).To(ContainElement(map[string]any{"name": "console-oidc", "mountPath": mount, "readOnly": true}))
	applyDryRun(t, objs)

	// A public client: no secret flag, no volume; the claim's default.
	gw = find(helmTemplate(t, "--set", "gateway.console.oidc.enabled=true", "--set", "gateway.replicas=1",
		"--set", "gateway.console.oidc.issuer=https://login.example.com", "--set", "gateway.console.oidc.clientID=console"), "Deployment", "modelgate-gateway")
	g.Expect(oidcArgs(gw)).To(Equal([]string{"--console-oidc-issuer=https://login.example.com",
		"--console-oidc-client-id=console", "--console-oidc-groups-claim=groups"}))
	g.Expect(volume(gw, "console-oidc")).To(BeNil())
	g.Expect(mounts(gw)).NotTo(ContainElement(HaveKeyWithValue("name", "console-oidc")))

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no issuer", []string{"--set", "gateway.console.oidc.enabled=true", "--set", "gateway.console.oidc.clientID=console",
			"--set", "blobs.signingKey.existingSecret=modelgate-blobs"}, "needs gateway.console.oidc.issuer and gateway.console.oidc.clientID"},
		{"two replicas without the signing key", []string{"--set", "gateway.console.oidc.enabled=true",
			"--set", "gateway.console.oidc.issuer=https://login.example.com", "--set", "gateway.console.oidc.clientID=console"},
			"needs blobs.signingKey.existingSecret"},
		{"an issuer that is not a URL", []string{"--set", "gateway.console.oidc.issuer=login.example.com"}, "/gateway/console/oidc/issuer"},
	} {
		_, err := runTool(helmBin, append([]string{"template", "modelgate", "charts/modelgate"}, tc.set...)...)
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)), tc.name)
	}
}
