package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("upstream TLS", func() {
	// The production path to a vendor is HTTPS with HTTP/2: the gateway
	// verifies the fake's certificate (the suite's UpstreamRootCAs, no
	// skipped verification) and its transport negotiates h2 over ALPN.
	It("reaches an HTTPS upstream over HTTP/2 for an openai-go request", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		fake := fakeupstream.NewOpenAITLS()
		t.Cleanup(fake.Close)
		g.Expect(fake.URL).To(HavePrefix("https://"))
		model := uniqueModel("tls-chat")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "oai", "openai", fake.URL+"/v1", fake.Key(), "gpt-4o-mini"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		client := openaiClient(acct.Key)
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Choices).NotTo(BeEmpty())
		reqs := fake.Requests()
		g.Expect(reqs).To(HaveLen(1))
		g.Expect(reqs[0].TLS).To(BeTrue(), "over TLS")
		g.Expect(reqs[0].ProtoMajor).To(Equal(2), "over HTTP/2")
	})
})
