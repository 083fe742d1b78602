package gemini

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func TestEmbed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewGemini()
	defer f.Close()
	p := New(fakeupstream.Client(), nil)
	b := upstream.Backend{Name: "gem", Provider: Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "gemini-embedding-001"}

	res, err := upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"hello world"}, Dimensions: 16})
	g.Expect(err).NotTo(HaveOccurred())
	req := f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(req.Path).To(Equal("/v1beta/models/gemini-embedding-001:embedContent"))
	g.Expect(req.Header.Get("x-goog-api-key")).To(Equal(f.Key()))
	g.Expect(req.JSON()).To(Equal(map[string]any{
		"content": map[string]any{"parts": []any{map[string]any{"text": "hello world"}}}, "outputDimensionality": float64(16)}))
	g.Expect(res.Vectors).To(HaveLen(1))
	g.Expect(float32s(res.Vectors[0])).To(Equal(fakeupstream.EmbeddingVector("hello world", 16)))
	g.Expect(res.Reported).To(BeFalse(), "Gemini reports no token count for embeddings")

	res, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"a", "b", "c"}})
	g.Expect(err).NotTo(HaveOccurred())
	req = f.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(req.Path).To(Equal("/v1beta/models/gemini-embedding-001:batchEmbedContents"))
	reqs, _ := req.JSON()["requests"].([]any)
	g.Expect(reqs).To(HaveLen(3))
	g.Expect(reqs[0]).To(HaveKeyWithValue("model", "models/gemini-embedding-001"))
	g.Expect(res.Vectors).To(HaveLen(3))
	for i, s := range []string{"a", "b", "c"} {
		g.Expect(float32s(res.Vectors[i])).To(Equal(fakeupstream.EmbeddingVector(s, 0)), "in order")
	}

	f.Enqueue(fakeupstream.Reply{Status: 503})
	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Texts: []string{"x"}})
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(503))
	g.Expect(ue.Retryable).To(BeTrue())

	_, err = upstream.Embed(ctx, p, b, upstream.EmbedRequest{Body: []byte(`{"input":[1]}`)})
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Retryable).To(BeFalse())
}
