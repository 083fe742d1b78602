package openai

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestEmbed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	p := New(fakeupstream.Client())
	b := upstream.Backend{Name: "oai", Provider: Name, BaseURL: f.URL + "/v1", APIKey: f.Key(), UpstreamModel: "text-embedding-3-small"}
	body := []byte(`{"model":"client-model","input":["a b","c"],"encoding_format":"base64","dimensions":4,"user":"u-1"}`)

	res, err := upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: body, Texts: []string{"a b", "c"}, Dimensions: 4, Base64: true})
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(req.Path).To(Equal("/v1/embeddings"))
	g.Expect(req.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
	g.Expect(string(req.Body)).To(Equal(`{"model":"text-embedding-3-small","input":["a b","c"],"encoding_format":"base64","dimensions":4,"user":"u-1"}`),
		"the client's bytes but the model")
	g.Expect(res.Body).NotTo(BeNil(), "the answer is passed on whole")
	g.Expect(res.Reported).To(BeTrue())
	g.Expect(res.PromptTokens).To(Equal(int64(3)))
	g.Expect(res.ReportedTotal).To(HaveValue(Equal(int64(3))))

	f.Enqueue(fakeupstream.Reply{NoUsage: true})
	res, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: body})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reported).To(BeFalse())

	f.Enqueue(fakeupstream.Reply{Status: 400, ErrorMessage: "This model does not support specifying dimensions."})
	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: body})
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Retryable).To(BeFalse())
	g.Expect(string(ue.ClientBody(upstream.ChatCompletions))).To(ContainSubstring("does not support specifying dimensions"))

	f.Enqueue(fakeupstream.Reply{Status: 500})
	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: body})
	g.Expect(upstream.IsRetryable(err)).To(BeTrue())
}
