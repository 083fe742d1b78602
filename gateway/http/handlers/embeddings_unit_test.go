package handlers

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestParseEmbeddings(t *testing.T) {
	for _, tc := range []struct {
		body string
		want embedRequest
	}{
		{`{"model":"m","input":"hi"}`, embedRequest{Model: "m", Texts: []string{"hi"}}},
		{`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`,
			embedRequest{Model: "m", Texts: []string{"a", "b"}, Base64: true, Dimensions: 256}},
		{`{"model":"m","input":[1,2,3],"encoding_format":"float"}`, embedRequest{Model: "m", Tokens: 3}},
		{`{"model":"m","input":[[1,2],[3]],"encoding_format":null,"dimensions":null}`, embedRequest{Model: "m", Tokens: 3}},
	} {
		r, msg := parseEmbeddings([]byte(tc.body))
		NewWithT(t).Expect(msg).To(BeEmpty(), tc.body)
		NewWithT(t).Expect(r).To(Equal(tc.want), tc.body)
	}
	for _, bad := range []string{
		``, `[]`, `{"input":"x"}`, `{"model":"","input":"x"}`, `{"model":7,"input":"x"}`,
		`{"model":"m"}`, `{"model":"m","input":null}`, `{"model":"m","input":""}`, `{"model":"m","input":[]}`,
		`{"model":"m","input":["a",""]}`, `{"model":"m","input":[[]]}`, `{"model":"m","input":[1,"a"]}`, `{"model":"m","input":{"text":"a"}}`,
		`{"model":"m","input":"x","encoding_format":"int8"}`, `{"model":"m","input":"x","dimensions":0}`,
		`{"model":"m","input":"x","dimensions":1.5}`, `{"model":"m","input":"x","dimensions":"8"}`,
	} {
		_, msg := parseEmbeddings([]byte(bad))
		NewWithT(t).Expect(msg).NotTo(BeEmpty(), bad)
	}
	many := make([]string, maxEmbeddingInputs+1)
	for i := range many {
		many[i] = "x"
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "input": many})
	_, msg := parseEmbeddings(body)
	NewWithT(t).Expect(msg).NotTo(BeEmpty(), "more than 2048 inputs")
}

func TestEstimateTokens(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&embedRequest{Texts: []string{"abcd", "ef"}}).estimateTokens()).To(Equal(int64(2)), "6 bytes, one token per 3")
	g.Expect((&embedRequest{Texts: []string{"abcdefg"}}).estimateTokens()).To(Equal(int64(3)), "rounded up")
	g.Expect((&embedRequest{Tokens: 17}).estimateTokens()).To(Equal(int64(17)), "a token array is its own count")
}

type renderedList struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

func decodeBase64Vector(g Gomega, raw json.RawMessage) []float32 {
	var s string
	g.Expect(json.Unmarshal(raw, &s)).To(Succeed())
	b, err := base64.StdEncoding.DecodeString(s)
	g.Expect(err).NotTo(HaveOccurred())
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestRenderEmbeddings(t *testing.T) {
	g := NewWithT(t)
	vecs := [][]float64{{0.25, -1.5, 1e-7}, {3, 0}}

	out, err := renderEmbeddings(embedRequest{Model: "client"}, &upstream.EmbedResult{Vectors: vecs}, 9)
	g.Expect(err).NotTo(HaveOccurred())
	var l renderedList
	g.Expect(json.Unmarshal(out, &l)).To(Succeed(), string(out))
	g.Expect(l.Object).To(Equal("list"))
	g.Expect(l.Model).To(Equal("client"))
	g.Expect(l.Usage.PromptTokens).To(Equal(int64(9)))
	g.Expect(l.Usage.TotalTokens).To(Equal(int64(9)))
	g.Expect(l.Data).To(HaveLen(2))
	g.Expect(l.Data[1].Index).To(Equal(1))
	g.Expect(l.Data[1].Object).To(Equal("embedding"))
	var f []float64
	g.Expect(json.Unmarshal(l.Data[0].Embedding, &f)).To(Succeed())
	g.Expect(f).To(Equal(vecs[0]))

	out, err = renderEmbeddings(embedRequest{Model: "client", Base64: true}, &upstream.EmbedResult{Vectors: vecs}, 9)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(out, &l)).To(Succeed(), string(out))
	g.Expect(decodeBase64Vector(g, l.Data[0].Embedding)).To(Equal([]float32{0.25, -1.5, 1e-7}), "little-endian float32, standard base64")

	// An OpenAI answer is passed on with the client's model; floats where
	// base64 was asked are encoded here.
	body := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,2]}],"model":"upstream-model","usage":{"prompt_tokens":4,"total_tokens":4}}`)
	out, err = renderEmbeddings(embedRequest{Model: "client"}, &upstream.EmbedResult{Body: body}, 4)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,2]}],"model":"client","usage":{"prompt_tokens":4,"total_tokens":4}}`))
	out, err = renderEmbeddings(embedRequest{Model: "client", Base64: true}, &upstream.EmbedResult{Body: body}, 4)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(out, &l)).To(Succeed(), string(out))
	g.Expect(decodeBase64Vector(g, l.Data[0].Embedding)).To(Equal([]float32{0.5, 2}))
	g.Expect(l.Model).To(Equal("client"))

	b64 := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAPwAAAEA="}],"model":"u","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	out, err = renderEmbeddings(embedRequest{Model: "client", Base64: true}, &upstream.EmbedResult{Body: b64}, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`"embedding":"AAAAPwAAAEA="`), "base64 from the upstream is kept")
}
