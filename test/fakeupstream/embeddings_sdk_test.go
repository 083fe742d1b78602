package fakeupstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// The embedding fakes against the official SDKs: each SDK's request is
// accepted and its answer decoded as the vendor's would be.
func TestEmbeddingFakesWithTheOfficialSDKs(t *testing.T) {
	ctx := context.Background()

	t.Run("openai-go", func(t *testing.T) {
		g := NewWithT(t)
		f := fakeupstream.NewOpenAI()
		defer f.Close()
		c := openai.NewClient(option.WithBaseURL(f.URL+"/v1"), option.WithAPIKey(f.Key()), option.WithMaxRetries(0))
		for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
			res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: openai.EmbeddingModelTextEmbedding3Small,
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a b", "c"}}, Dimensions: openai.Int(3), EncodingFormat: format})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.Last().Rejected).To(BeFalse())
			g.Expect(res.Data).To(HaveLen(2))
			g.Expect(float32s(res.Data[1].Embedding)).To(Equal(fakeupstream.EmbeddingVector("c", 3)), string(format))
			g.Expect(res.Usage.PromptTokens).To(Equal(int64(3)))
		}
	})

	t.Run("bedrockruntime InvokeModel, Titan", func(t *testing.T) {
		g := NewWithT(t)
		f := fakeupstream.NewBedrock()
		defer f.Close()
		c := bedrockSDKClient(f, f.Key(), fakeupstream.BedrockRegion, nil)
		out, err := c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("amazon.titan-embed-text-v2:0"),
			ContentType: aws.String("application/json"), Accept: aws.String("application/json"),
			Body: []byte(`{"inputText":"one two","dimensions":256,"normalize":true}`)})
		g.Expect(err).NotTo(HaveOccurred())
		var body struct {
			Embedding           []float32 `json:"embedding"`
			InputTextTokenCount int64     `json:"inputTextTokenCount"`
		}
		g.Expect(json.Unmarshal(out.Body, &body)).To(Succeed())
		g.Expect(body.Embedding).To(Equal(fakeupstream.EmbeddingVector("one two", 256)))
		g.Expect(body.InputTextTokenCount).To(Equal(int64(2)))

		_, err = c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("cohere.embed-english-v3"),
			ContentType: aws.String("application/json"), Body: []byte(`{"texts":["x"],"input_type":"search_query","embedding_types":["float"]}`)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Last().Rejected).To(BeFalse())
	})

	t.Run("genai EmbedContent", func(t *testing.T) {
		g := NewWithT(t)
		f := fakeupstream.NewGemini()
		defer f.Close()
		c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: f.Key(), Backend: genai.BackendGeminiAPI,
			HTTPClient: fakeupstream.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: f.URL + "/", APIVersion: "v1beta"}})
		g.Expect(err).NotTo(HaveOccurred())
		dims := int32(4)
		res, err := c.Models.EmbedContent(ctx, "gemini-embedding-001", []*genai.Content{genai.NewContentFromText("first", genai.RoleUser),
			genai.NewContentFromText("second", genai.RoleUser)}, &genai.EmbedContentConfig{OutputDimensionality: &dims})
		g.Expect(err).NotTo(HaveOccurred(), string(f.Last().Body))
		g.Expect(res.Embeddings).To(HaveLen(2))
		g.Expect(res.Embeddings[1].Values).To(Equal(fakeupstream.EmbeddingVector("second", 4)))
	})
}
