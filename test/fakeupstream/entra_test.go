package fakeupstream_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

func entraCredential(t *testing.T, idp *fakeupstream.EntraID, tenant, secret string) azcore.TokenCredential {
	t.Helper()
	c, err := azidentity.NewClientSecretCredential(tenant, fakeupstream.EntraClientID, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions:            azcore.ClientOptions{Transport: idp.Client(), Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: idp.URL}},
		DisableInstanceDiscovery: true})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// The Entra ID and Azure fakes against Microsoft's azidentity and
// openai-go's Azure support: the token the SDK gets is accepted, refusals
// carry Entra ID's AADSTS errors.
func TestEntraIDFakeWithTheOfficialSDKs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	idp := fakeupstream.NewEntraID()
	defer idp.Close()
	f := fakeupstream.NewAzureOpenAI()
	defer f.Close()

	params := openai.ChatCompletionNewParams{Model: "dep", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	client := func(cred azcore.TokenCredential) openai.Client {
		return openai.NewClient(azure.WithEndpoint(f.URL, "2024-10-21"), azure.WithTokenCredential(cred), azure.WithUnsafeAllowHTTP(),
			ooption.WithHTTPClient(fakeupstream.Client()), ooption.WithMaxRetries(0))
	}
	good := entraCredential(t, idp, fakeupstream.EntraTenant, fakeupstream.EntraClientSecret)

	// Without AcceptEntraID the Azure fake takes keys only.
	c := client(good)
	_, err := c.Chat.Completions.New(ctx, params)
	var oerr *openai.Error
	g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
	g.Expect(oerr.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(oerr.RawJSON()).To(ContainSubstring("Access token is missing, invalid"))

	f.AcceptEntraID(idp)
	f.Enqueue(fakeupstream.Reply{Text: "Hello with a token", Usage: fakeupstream.Usage{InputTokens: 5, OutputTokens: 3}})
	r, err := c.Chat.Completions.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Choices[0].Message.Content).To(Equal("Hello with a token"))
	g.Expect(f.Last().Header.Get("Authorization")).To(HavePrefix("Bearer "))
	g.Expect(idp.Issued()).To(Equal(1))

	for _, tc := range []struct {
		name, tenant, secret, scope, code string
	}{
		{"wrong secret", fakeupstream.EntraTenant, "nope", fakeupstream.EntraScope, "AADSTS7000215"},
		{"unknown tenant", "11111111-1111-1111-1111-111111111111", fakeupstream.EntraClientSecret, fakeupstream.EntraScope, "AADSTS90002"},
		{"other resource", fakeupstream.EntraTenant, fakeupstream.EntraClientSecret, "https://management.azure.com/.default", "AADSTS70011"},
	} {
		_, err := entraCredential(t, idp, tc.tenant, tc.secret).GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{tc.scope}})
		g.Expect(err).To(MatchError(ContainSubstring(tc.code)), tc.name)
	}
	g.Expect(idp.Issued()).To(Equal(1))
}
