package simulated_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

// A count is what a generation of the same body reports as its input,
// whatever protocol the provider generates in.
func TestCountTokensIsTheInputAGenerationReports(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	conversation := `"system":"You are terse.","tools":[{"name":"get_weather","description":"weather","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"},{"role":"user","content":"say the magic words"}]`
	for _, p := range []*simulated.Provider{simulated.New(upstream.Messages), simulated.New(upstream.ChatCompletions, upstream.Responses)} {
		b := upstream.Backend{Name: "sim"}
		n, err := upstream.CountTokens(ctx, p, b, []byte(`{"model":"m",`+conversation+`}`), nil, "")
		g.Expect(err).NotTo(HaveOccurred())
		res, err := upstream.Invoke(ctx, p, b, upstream.Request{Protocol: upstream.Messages,
			Body: []byte(`{"model":"m","max_tokens":100,` + conversation + `}`)})
		g.Expect(err).NotTo(HaveOccurred())
		res.Close()
		g.Expect(n).To(BeNumerically(">", 0))
		g.Expect(n).To(Equal(res.Usage.PromptTokens()), "%v", p.Protocols())
	}
}

func TestCountTokensRefusesAsTheAPIDoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	p := simulated.New(upstream.Messages)
	b := upstream.Backend{Name: "sim"}
	_, err := upstream.CountTokens(ctx, p, b, []byte(`{"model":"m"}`), nil, "")
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(string(ue.ClientBody(upstream.Messages))).To(ContainSubstring("messages: Field required"))

	_, err = upstream.CountTokens(ctx, p, b, []byte(`{"model":"m","messages":[{"role":"user","content":"[sim:fail=503] x"}]}`), nil, "")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(503))
	g.Expect(ue.Retryable).To(BeTrue())
}
