package e2e

import (
	"context"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("upstream TLS", func() {
	// The production path to a vendor is HTTPS with HTTP/2, and it is what
	// every fake serves by default: the gateway verifies the fake's
	// certificate (the suite's UpstreamRootCAs, no skipped verification)
	// and its transport negotiates h2 over ALPN.
	It("reaches an HTTPS upstream over HTTP/2 for an openai-go request", func() {
		if os.Getenv(fakeupstream.PlainEnv) == "http" {
			Skip(fakeupstream.PlainEnv + "=http serves the fakes over plain HTTP")
		}
		fake := startFake(GinkgoTB(), "openai")
		Expect(fake.URL).To(HavePrefix("https://"))
		req := chatThrough(fake, "tls-chat")
		Expect(req.TLS).To(BeTrue(), "over TLS")
		Expect(req.ProtoMajor).To(Equal(2), "over HTTP/2")
	})

	// An in-cluster model server without TLS is reached over plain
	// HTTP/1.1 through the same transport.
	It("reaches a plain-HTTP upstream over HTTP/1.1", func() {
		fake := fakeupstream.NewOpenAIPlain()
		DeferCleanup(fake.Close)
		Expect(fake.URL).To(HavePrefix("http://"))
		req := chatThrough(fake, "plain-chat")
		Expect(req.TLS).To(BeFalse(), "without TLS")
		Expect(req.ProtoMajor).To(Equal(1), "over HTTP/1.1")
	})
})

// chatThrough sends one openai-go chat request through the gateway to fake
// and returns what the fake received.
func chatThrough(fake *fakeupstream.Server, prefix string) fakeupstream.Request {
	t := GinkgoTB()
	model := uniqueModel(prefix)
	textModel(t, framework.SystemNamespace, model, fakeBackend(t, "oai", "openai", fake.URL+"/v1", fake.Key(), "gpt-4o-mini"))
	acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
	client := openaiClient(acct.Key)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Choices).NotTo(BeEmpty())
	reqs := fake.Requests()
	Expect(reqs).To(HaveLen(1))
	return reqs[0]
}
