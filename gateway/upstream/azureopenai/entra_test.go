package azureopenai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/azureopenai"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// entraBackend is a backend whose credential Secret holds a service
// principal: the client secret under the referenced key, tenantId and
// clientId beside it.
func entraBackend(azure *fakeupstream.Server, idp *fakeupstream.EntraID, secret map[string]string) upstream.Backend {
	return upstream.Backend{Name: "az", Provider: azureopenai.Name, BaseURL: azure.URL, UpstreamModel: "dep",
		APIKey: secret["clientSecret"],
		SecretKey: func(_ context.Context, key string) (string, error) {
			return credential.FromData(map[string][]byte{key: []byte(secret[key])}, "ns", "azure-sp", key)
		},
		Options: map[string]string{azureopenai.OptionAPIVersion: "2024-10-21", azureopenai.OptionAuth: azureopenai.AuthEntraID,
			azureopenai.OptionAuthorityHost: idp.URL}}
}

func principal() map[string]string {
	return map[string]string{"tenantId": fakeupstream.EntraTenant, "clientId": fakeupstream.EntraClientID,
		"clientSecret": fakeupstream.EntraClientSecret}
}

func send(t *testing.T, p *azureopenai.Provider, b upstream.Backend) (int, error) {
	t.Helper()
	resp, err := p.Send(context.Background(), b, upstream.ChatCompletions,
		[]byte(`{"model":"dep","messages":[{"role":"user","content":"hi"}]}`), false, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestEntraIDServicePrincipal(t *testing.T) {
	g := NewWithT(t)
	idp := fakeupstream.NewEntraID()
	defer idp.Close()
	azure := fakeupstream.NewAzureOpenAI()
	defer azure.Close()
	azure.AcceptEntraID(idp)
	p := azureopenai.New(fakeupstream.Client())
	p.SetIdentityClient(idp.Client())
	b := entraBackend(azure, idp, principal())

	for i := range 2 {
		status, err := send(t, p, b)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "call %d", i)
	}
	g.Expect(idp.Issued()).To(Equal(1), "the token is cached")
	for _, r := range azure.Requests() {
		g.Expect(r.Rejected).To(BeFalse())
		g.Expect(r.Header.Get("api-key")).To(BeEmpty())
		g.Expect(r.Header.Get("Authorization")).To(HavePrefix("Bearer "))
		g.Expect(idp.Valid(r.Header.Get("Authorization")[len("Bearer "):])).To(BeTrue())
	}
	var form string
	for _, r := range idp.Requests() {
		if r.Method == http.MethodPost {
			form = string(r.Body)
		}
	}
	g.Expect(form).To(ContainSubstring("grant_type=client_credentials"))
	g.Expect(form).To(ContainSubstring("scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default"))

	// A token Azure refuses (revoked) is dropped: the call after the 401
	// gets a new one.
	idp.RevokeAll()
	status, err := send(t, p, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	status, err = send(t, p, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(idp.Issued()).To(Equal(2))
}

func TestEntraIDRefusals(t *testing.T) {
	idp := fakeupstream.NewEntraID()
	defer idp.Close()
	azure := fakeupstream.NewAzureOpenAI()
	defer azure.Close()
	azure.AcceptEntraID(idp)
	p := azureopenai.New(fakeupstream.Client())
	p.SetIdentityClient(idp.Client())
	for _, tc := range []struct {
		name   string
		secret map[string]string
		auth   string
		want   string
	}{
		{"wrong secret", map[string]string{"tenantId": fakeupstream.EntraTenant, "clientId": fakeupstream.EntraClientID, "clientSecret": "not-it"},
			azureopenai.AuthEntraID, "Microsoft Entra ID refused the credential (401"},
		{"unknown tenant", map[string]string{"tenantId": "00000000-0000-0000-0000-000000000000", "clientId": fakeupstream.EntraClientID, "clientSecret": "sekrit-value"},
			azureopenai.AuthEntraID, "Microsoft Entra ID"},
		{"no client ID", map[string]string{"tenantId": fakeupstream.EntraTenant, "clientSecret": "sekrit-value"},
			azureopenai.AuthEntraID, "has no key clientId"},
		{"unknown auth", principal(), "oauth", `option auth "oauth"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := entraBackend(azure, idp, tc.secret)
			b.Options[azureopenai.OptionAuth] = tc.auth
			_, err := send(t, p, b)
			ue, ok := upstream.As(err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(ue.Class).To(Equal(upstream.Failover))
			g.Expect(ue.Status).To(Equal(http.StatusBadGateway))
			g.Expect(ue.Message).To(ContainSubstring(tc.want))
			g.Expect(fmt.Sprint(err)).NotTo(ContainSubstring(tc.secret["clientSecret"]))
		})
	}
	g := NewWithT(t)
	g.Expect(azure.Requests()).To(BeEmpty(), "no call without a token")
	g.Expect(idp.Issued()).To(Equal(0))
}

func TestEntraIDWorkloadIdentity(t *testing.T) {
	g := NewWithT(t)
	idp := fakeupstream.NewEntraID()
	defer idp.Close()
	azure := fakeupstream.NewAzureOpenAI()
	defer azure.Close()
	azure.AcceptEntraID(idp)
	const clientID = "55556666-dddd-7777-eeee-8888ffff9999"
	idp.Federate(clientID, "projected-service-account-token")
	file := filepath.Join(t.TempDir(), "azure-identity-token")
	g.Expect(os.WriteFile(file, []byte("projected-service-account-token"), 0o600)).To(Succeed())
	t.Setenv("AZURE_TENANT_ID", fakeupstream.EntraTenant)
	t.Setenv("AZURE_CLIENT_ID", clientID)
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", file)

	p := azureopenai.New(fakeupstream.Client())
	p.SetIdentityClient(idp.Client())
	b := entraBackend(azure, idp, principal())
	b.APIKey, b.SecretKey = "", nil // no Secret: the pod's identity
	status, err := send(t, p, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(idp.Issued()).To(Equal(1))

	g.Expect(os.Unsetenv("AZURE_FEDERATED_TOKEN_FILE")).To(Succeed()) // restored by t.Setenv's cleanup
	p.SetIdentityClient(idp.Client())
	_, err = send(t, p, b)
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Message).To(ContainSubstring("workload identity"))
}

func TestAPIKeyIsNotSentAsBearer(t *testing.T) {
	g := NewWithT(t)
	azure := fakeupstream.NewAzureOpenAI()
	defer azure.Close()
	p := azureopenai.New(fakeupstream.Client())
	b := upstream.Backend{Name: "az", BaseURL: azure.URL, APIKey: azure.Key(), UpstreamModel: "dep",
		Options: map[string]string{azureopenai.OptionAuth: azureopenai.AuthAPIKey}}
	status, err := send(t, p, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(azure.Last().Header.Get("Authorization")).To(BeEmpty())

	// A bearer token the fake's authority never issued is refused in
	// Azure's shape.
	req, _ := http.NewRequest(http.MethodPost, azure.URL+"/openai/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer forged")
	resp, err := fakeupstream.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(string(body)).To(ContainSubstring("Access token is missing, invalid"))
}
