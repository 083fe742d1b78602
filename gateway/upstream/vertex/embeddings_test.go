package vertex

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
	fake, p, gem, claude := setup(t)
	gem.UpstreamModel = "gemini-embedding-001"
	resource := "projects/" + fakeupstream.VertexProject + "/locations/us-east5/publishers/google/models/gemini-embedding-001"

	res, err := upstream.Embed(ctx, p, gem, upstream.EmbedRequest{Texts: []string{"vertex text"}, Dimensions: 5})
	g.Expect(err).NotTo(HaveOccurred())
	req := fake.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(req.Path).To(Equal("/v1/" + resource + ":embedContent"))
	g.Expect(req.Header.Get("Authorization")).To(HavePrefix("Bearer "))
	g.Expect(req.JSON()).To(HaveKeyWithValue("outputDimensionality", float64(5)))
	g.Expect(float32s(res.Vectors[0])).To(Equal(fakeupstream.EmbeddingVector("vertex text", 5)))
	g.Expect(res.Reported).To(BeFalse())

	res, err = upstream.Embed(ctx, p, gem, upstream.EmbedRequest{Texts: []string{"x", "y"}})
	g.Expect(err).NotTo(HaveOccurred())
	req = fake.Last()
	g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
	g.Expect(req.Path).To(Equal("/v1/" + resource + ":batchEmbedContents"))
	reqs, _ := req.JSON()["requests"].([]any)
	g.Expect(reqs).To(HaveLen(2))
	g.Expect(reqs[1]).To(HaveKeyWithValue("model", resource), "each request names the model's resource")
	g.Expect(float32s(res.Vectors[1])).To(Equal(fakeupstream.EmbeddingVector("y", 0)))

	_, err = upstream.Embed(ctx, p, claude, upstream.EmbedRequest{Texts: []string{"x"}})
	g.Expect(upstream.IsRetryable(err)).To(BeTrue(), "a Claude backend has no embeddings: the next backend is tried")
}
