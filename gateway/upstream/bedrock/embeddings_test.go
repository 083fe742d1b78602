package bedrock_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/bedrock"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// float32s is v in the precision the fake's float32 vectors have.
func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func TestEmbedTitan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := fakeBackend(f, "amazon.titan-embed-text-v2:0")

	res, err := upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"one two three", "four"}, Dimensions: 256})
	g.Expect(err).NotTo(HaveOccurred())
	reqs := f.Requests()
	g.Expect(reqs).To(HaveLen(2), "Titan embeds one text per call")
	for i, text := range []string{"one two three", "four"} {
		g.Expect(reqs[i].Rejected).To(BeFalse(), string(reqs[i].Body))
		g.Expect(reqs[i].Path).To(Equal("/model/amazon.titan-embed-text-v2:0/invoke"))
		g.Expect(reqs[i].Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeupstream.BedrockAccessKeyID + "/"))
		g.Expect(reqs[i].JSON()).To(Equal(map[string]any{"inputText": text, "dimensions": float64(256)}))
		g.Expect(float32s(res.Vectors[i])).To(Equal(fakeupstream.EmbeddingVector(text, 256)))
	}
	g.Expect(res.Body).To(BeNil())
	g.Expect(res.Reported).To(BeTrue())
	g.Expect(res.PromptTokens).To(Equal(int64(3+1)), "inputTextTokenCount of both calls")

	f.Enqueue(fakeupstream.Reply{Status: 429})
	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"x"}})
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(429))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.Message).To(ContainSubstring("ThrottlingException"))

	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"x"}, Dimensions: 300})
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(400), "Titan's own validation of dimensions")
	g.Expect(ue.Retryable).To(BeFalse())

	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: []byte(`{"input":[1,2]}`)})
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(400), "token arrays have no Titan wire")
}

func TestEmbedCohere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := fakeBackend(f, "cohere.embed-english-v3")
	texts := make([]string, 100)
	for i := range texts {
		texts[i] = "text number " + string(rune('a'+i%26))
	}

	res, err := upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: texts})
	g.Expect(err).NotTo(HaveOccurred())
	reqs := f.Requests()
	g.Expect(reqs).To(HaveLen(2), "at most 96 texts per call")
	g.Expect(reqs[0].Rejected).To(BeFalse(), string(reqs[0].Body))
	g.Expect(reqs[0].JSON()).To(HaveKeyWithValue("input_type", "search_document"))
	g.Expect(reqs[0].JSON()).To(HaveKeyWithValue("embedding_types", []any{"float"}))
	g.Expect(reqs[0].JSON()["texts"]).To(HaveLen(96))
	g.Expect(reqs[1].JSON()["texts"]).To(HaveLen(4))
	g.Expect(res.Vectors).To(HaveLen(100))
	g.Expect(float32s(res.Vectors[99])).To(Equal(fakeupstream.EmbeddingVector(texts[99], 0)))
	g.Expect(res.Reported).To(BeTrue(), "X-Amzn-Bedrock-Input-Token-Count")
	g.Expect(res.PromptTokens).To(Equal(int64(300)))

	b.Options["inputType"] = "search_query"
	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"q"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Last().JSON()).To(HaveKeyWithValue("input_type", "search_query"))

	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"q"}, Dimensions: 256})
	ue, _ := upstream.As(err)
	g.Expect(ue.Status).To(Equal(400), "embed v3 has a fixed size")

	unknown := fakeBackend(f, "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc")
	_, err = upstream.Embed(ctx, p, unknown, upstream.EmbedRequest{Texts: []string{"q"}})
	ue, _ = upstream.As(err)
	g.Expect(ue.Retryable).To(BeTrue(), "a backend that cannot serve: the next is tried")
	g.Expect(ue.Message).To(ContainSubstring("embeddingFormat"))
}
