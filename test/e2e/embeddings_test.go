package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/upstream/azureopenai"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// embeddingModel declares an embedding model served by the given backends
// at 2 USD per 1M input tokens (one quota unit per token: 500 000 quota per
// USD) and waits until the route is ready and the price is published.
func embeddingModel(t testing.TB, model string, backends ...v1.Backend) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := framework.SystemNamespace
	route := &v1.ModelRoute{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: ns},
		Spec:       v1.ModelRouteSpec{Model: v1.ModelID(model), Type: v1.ModelTypeEmbedding, Backends: backends},
	}
	price := &v1.PriceRule{
		ObjectMeta: metav1.ObjectMeta{Name: model, Namespace: ns},
		Spec: v1.PriceRuleSpec{Model: v1.ModelID(model), ChargeType: v1.ChargePerToken,
			PriceBasis: v1.BasisTextInputTokens, Unit: v1.Unit1MTokens, UnitPrice: "2"},
	}
	g.Expect(stack.Client.Create(ctx, route)).To(Succeed())
	g.Expect(stack.Client.Create(ctx, price)).To(Succeed())
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), route)
		_ = stack.Client.Delete(context.Background(), price)
	})
	g.Expect(stack.Env.WaitReady(ctx, route)).To(Succeed())
	g.Expect(stack.Env.WaitReady(ctx, price)).To(Succeed(), "published")
	g.Expect(stack.WaitCached(ctx, route)).To(Succeed())
	g.Expect(stack.WaitCached(ctx, price)).To(Succeed())
}

// embed calls the gateway with openai-go's client.Embeddings.New.
func embed(t testing.TB, key string, params openai.EmbeddingNewParams) (*openai.CreateEmbeddingResponse, error) {
	t.Helper()
	c := openaiClient(key)
	return c.Embeddings.New(context.Background(), params)
}

// strings32 is the SDK's float64 vector in the float32 precision the
// upstreams answer in.
func strings32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// postRaw posts a raw JSON body and decodes the JSON answer.
func postRaw(t testing.TB, path, key, body string) (int, map[string]any) {
	t.Helper()
	g := NewWithT(t)
	req, _ := http.NewRequest("POST", stack.BaseURL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var out map[string]any
	g.Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
	return resp.StatusCode, out
}

var _ = Describe("Embeddings", func() {
	// One account calls five embedding models with openai-go, through an
	// OpenAI-compatible upstream (the client's bytes passed on), Azure
	// OpenAI (a deployment's embeddings operation), Bedrock's
	// Titan (one InvokeModel per text, signed) and Cohere, and Gemini
	// (batchEmbedContents), in floats and base64, with dimensions: the
	// vectors are the upstream's, each request has one settled usage row of
	// the upstream's input tokens (Gemini's: the documented estimate) and
	// the ledger holds their sum.
	It("serves openai-go through OpenAI-compatible, Azure, Bedrock Titan and Cohere, and Gemini upstreams, floats and base64, billed exactly", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		oai := startFake(t, "openai")
		brk := fakeupstream.NewBedrock()
		t.Cleanup(brk.Close)
		gem := startFake(t, "gemini")
		viaOpenAI, viaTitan, viaGemini := uniqueModel("emb-openai"), uniqueModel("emb-titan"), uniqueModel("emb-gemini")
		embeddingModel(t, viaOpenAI, fakeBackend(t, "oai", "openai", oai.URL+"/v1", oai.Key(), "text-embedding-3-small"))
		embeddingModel(t, viaTitan, bedrockBackend(t, "aws", brk, "amazon.titan-embed-text-v2:0"))
		embeddingModel(t, viaGemini, fakeBackend(t, "gem", "gemini", gem.URL, gem.Key(), "gemini-embedding-001"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		var total int64
		rows := 0
		expectRow := func(model string, tokens int64) {
			rows++
			row := usageRows(t, acct, rows)[0]
			g.Expect(row.ModelName).To(Equal(model))
			g.Expect(row.BillingPhase).To(Equal("settled"))
			g.Expect(row.PromptTokens).To(Equal(tokens))
			g.Expect(row.CompletionTokens).To(BeZero())
			g.Expect(int64(row.Quota)).To(Equal(tokens), "2 USD per 1M tokens is one quota unit per token")
			total += tokens
			ledgerUsed(t, acct, total)
		}

		By("OpenAI-compatible, floats, dimensions")
		texts := []string{"hello embedding world", "second"}
		res, err := embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaOpenAI,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, Dimensions: openai.Int(4), User: openai.String("u-7")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Model).To(Equal(viaOpenAI))
		g.Expect(res.Data).To(HaveLen(2))
		for i, s := range texts {
			g.Expect(res.Data[i].Index).To(Equal(int64(i)))
			g.Expect(strings32(res.Data[i].Embedding)).To(Equal(fakeupstream.EmbeddingVector(s, 4)))
		}
		g.Expect(res.Usage.PromptTokens).To(Equal(int64(4)))
		g.Expect(res.Usage.TotalTokens).To(Equal(int64(4)))
		up := oai.Last()
		g.Expect(up.Rejected).To(BeFalse(), string(up.Body))
		g.Expect(up.Path).To(Equal("/v1/embeddings"))
		g.Expect(up.JSON()).To(Equal(map[string]any{"model": "text-embedding-3-small", "input": []any{"hello embedding world", "second"},
			"dimensions": float64(4), "user": "u-7"}), "the client's body but the model")
		g.Expect(string(up.Body)).NotTo(ContainSubstring(acct.Key))
		expectRow(viaOpenAI, 4)

		By("OpenAI-compatible, base64")
		res, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaOpenAI,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("just one")}, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings32(res.Data[0].Embedding)).To(Equal(fakeupstream.EmbeddingVector("just one", 0)))
		g.Expect(oai.Last().JSON()).To(HaveKeyWithValue("encoding_format", "base64"))
		expectRow(viaOpenAI, 2)

		By("Azure OpenAI, a deployment's embeddings")
		az := fakeupstream.NewAzureOpenAI()
		t.Cleanup(az.Close)
		az.SetDeployments("emb-deployment")
		azb := fakeBackend(t, "azure", azureopenai.Name, az.URL, az.Key(), "emb-deployment")
		azb.Options = map[string]string{azureopenai.OptionAPIVersion: "2024-10-21"}
		viaAzure := uniqueModel("emb-azure")
		embeddingModel(t, viaAzure, azb)
		res, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaAzure,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("azure text here")}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Model).To(Equal(viaAzure))
		g.Expect(strings32(res.Data[0].Embedding)).To(Equal(fakeupstream.EmbeddingVector("azure text here", 0)))
		g.Expect(az.Last().Path).To(Equal("/openai/deployments/emb-deployment/embeddings"))
		g.Expect(az.Last().Header.Get("api-key")).To(Equal(az.Key()))
		expectRow(viaAzure, 3)

		By("Bedrock Titan, base64 encoded by the gateway, dimensions")
		texts = []string{"a b c", "d"}
		res, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaTitan,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, Dimensions: openai.Int(256),
			EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Model).To(Equal(viaTitan))
		g.Expect(res.Data).To(HaveLen(2))
		for i, s := range texts {
			g.Expect(strings32(res.Data[i].Embedding)).To(Equal(fakeupstream.EmbeddingVector(s, 256)))
		}
		raw := res.RawJSON()
		g.Expect(raw).To(ContainSubstring(`"embedding":"` + fakeupstream.EncodeEmbedding(fakeupstream.EmbeddingVector("d", 256)) + `"`))
		g.Expect(res.Usage.PromptTokens).To(Equal(int64(4)), "inputTextTokenCount of both calls")
		reqs := brk.Requests()
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0].Path).To(Equal("/model/amazon.titan-embed-text-v2:0/invoke"))
		g.Expect(reqs[0].JSON()).To(Equal(map[string]any{"inputText": "a b c", "dimensions": float64(256)}))
		g.Expect(reqs[1].Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeupstream.BedrockAccessKeyID + "/"))
		expectRow(viaTitan, 4)

		By("Bedrock Cohere, floats: the input-token header's count")
		viaCohere := uniqueModel("emb-cohere")
		embeddingModel(t, viaCohere, bedrockBackend(t, "cohere", brk, "cohere.embed-multilingual-v3"))
		texts = []string{"uno dos", "tres"}
		res, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaCohere, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
		g.Expect(err).NotTo(HaveOccurred())
		for i, s := range texts {
			g.Expect(strings32(res.Data[i].Embedding)).To(Equal(fakeupstream.EmbeddingVector(s, 0)))
		}
		g.Expect(res.Usage.PromptTokens).To(Equal(int64(3)))
		g.Expect(brk.Last().JSON()).To(HaveKeyWithValue("texts", []any{"uno dos", "tres"}), "one call for the array")
		expectRow(viaCohere, 3)

		By("Gemini, floats: the estimate of the input's bytes")
		texts = []string{"one two three", "four five"}
		res, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaGemini,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, Dimensions: openai.Int(6)})
		g.Expect(err).NotTo(HaveOccurred())
		for i, s := range texts {
			g.Expect(strings32(res.Data[i].Embedding)).To(Equal(fakeupstream.EmbeddingVector(s, 6)))
		}
		est := pricing.EstimateInputTokens(int64(len("one two three") + len("four five")))
		g.Expect(res.Usage.PromptTokens).To(Equal(est))
		g.Expect(gem.Last().Path).To(Equal("/v1beta/models/gemini-embedding-001:batchEmbedContents"))
		expectRow(viaGemini, est)

		By("the model list and the price catalog")
		_, _, body := getJSON(t, "/v1/models?type=embedding", acct.Key)
		g.Expect(ids(body)).To(ContainElements(viaOpenAI, viaTitan, viaGemini))
		for _, d := range body["data"].([]any) {
			g.Expect(d).To(HaveKeyWithValue("supported_endpoint_types", []any{"embeddings"}))
		}
		_, _, body = getJSON(t, "/v1/models", acct.Key)
		g.Expect(ids(body)).NotTo(ContainElement(viaOpenAI), "the default list is text models")
		code, _, body := getJSON(t, "/v1/pricing?type=embedding&model="+viaTitan, acct.Key)
		g.Expect(code).To(Equal(200))
		g.Expect(body["data"]).To(ConsistOf(And(HaveKeyWithValue("id", viaTitan), HaveKeyWithValue("type", "embedding"),
			HaveKeyWithValue("prices", ConsistOf(And(HaveKeyWithValue("charge_type", "per_token"),
				HaveKeyWithValue("price_basis", "text_input_tokens"), HaveKeyWithValue("unit_price", "2")))))))

		By("wrong family, bad input: refused, nothing charged")
		chatModel := uniqueModel("emb-chat")
		textModel(t, framework.SystemNamespace, chatModel, sim("sim", "simulated"))
		_, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: chatModel, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		var apiErr *openai.Error
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		g.Expect(apiErr.StatusCode).To(Equal(400))
		g.Expect(apiErr.Message).To(ContainSubstring("/v1/chat/completions"))
		chat := openaiClient(acct.Key)
		_, err = chat.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: viaOpenAI,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		g.Expect(apiErr.StatusCode).To(Equal(400))
		g.Expect(apiErr.Message).To(ContainSubstring("/v1/embeddings"))
		for _, bad := range []string{
			`{"model":"` + viaOpenAI + `","input":""}`,
			`{"model":"` + viaOpenAI + `","input":[]}`,
			`{"model":"` + viaOpenAI + `"}`,
			`{"model":"` + viaOpenAI + `","input":"x","encoding_format":"int8"}`,
			`{"model":"` + viaOpenAI + `","input":"x","dimensions":0}`,
			`{"input":"x"}`,
		} {
			code, body := postRaw(t, "/v1/embeddings", acct.Key, bad)
			g.Expect(code).To(Equal(400), bad)
			g.Expect(body["error"]).To(HaveKeyWithValue("type", "invalid_request_error"), bad)
		}
		_, err = embed(t, acct.Key, openai.EmbeddingNewParams{Model: viaTitan,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 2, 3}}})
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
		g.Expect(apiErr.StatusCode).To(Equal(400), "Titan has no token-array input")
		usageRows(t, acct, rows)
		ledgerUsed(t, acct, total)
	})

	// The first backend answers 503: the request moves to the next one and
	// is billed once, on the backend that served it.
	It("fails over from a failing upstream to the next", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		bad, good := startFake(t, "openai"), startFake(t, "openai")
		a := fakeBackend(t, "a-first", "openai", bad.URL, bad.Key(), "emb-a")
		b := fakeBackend(t, "b-next", "openai", good.URL, good.Key(), "emb-b")
		b.Priority = 5
		model := uniqueModel("emb-failover")
		embeddingModel(t, model, a, b)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		bad.Enqueue(fakeupstream.Reply{Status: 503})
		good.Enqueue(fakeupstream.Reply{Usage: fakeupstream.Usage{InputTokens: 11}})

		res, err := embed(t, acct.Key, openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("fail over")}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings32(res.Data[0].Embedding)).To(Equal(fakeupstream.EmbeddingVector("fail over", 0)))
		g.Expect(res.Usage.PromptTokens).To(Equal(int64(11)))
		g.Expect(bad.Count()).To(Equal(1))
		g.Expect(good.Last().Model()).To(Equal("emb-b"))
		row := usageRows(t, acct, 1)[0]
		g.Expect(row.PromptTokens).To(Equal(int64(11)))
		g.Expect(int64(row.Quota)).To(Equal(int64(11)))
		ledgerUsed(t, acct, 11)
	})
})
