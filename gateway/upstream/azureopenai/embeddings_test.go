package azureopenai

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestEmbed(t *testing.T) {
	f := fakeupstream.NewAzureOpenAI()
	defer f.Close()
	f.SetDeployments("emb-dep")
	body := []byte(`{"model":"client-model","input":"one two"}`)
	for _, tc := range []struct{ version, path, query, model string }{
		{"", "/openai/v1/embeddings", "", "emb-dep"},
		{"2024-10-21", "/openai/deployments/emb-dep/embeddings", "api-version=2024-10-21", "emb-dep"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			b := upstream.Backend{Name: "az", Provider: Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "emb-dep",
				Options: map[string]string{OptionAPIVersion: tc.version}}
			res, err := upstream.Embed(context.Background(), New(fakeupstream.Client()), b, upstream.EmbedRequest{Body: body, Texts: []string{"one two"}})
			g.Expect(err).NotTo(HaveOccurred())
			req := f.Last()
			g.Expect(req.Rejected).To(BeFalse(), string(req.Body))
			g.Expect(req.Path).To(Equal(tc.path))
			g.Expect(req.Query).To(Equal(tc.query))
			g.Expect(req.Header.Get("api-key")).To(Equal(f.Key()))
			g.Expect(req.Model()).To(Equal(tc.model))
			g.Expect(res.PromptTokens).To(Equal(int64(2)))
			g.Expect(res.Reported).To(BeTrue())
		})
	}

	g := NewWithT(t)
	b := upstream.Backend{Name: "az", Provider: Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "missing"}
	_, err := upstream.Embed(context.Background(), New(fakeupstream.Client()), b, upstream.EmbedRequest{Body: body})
	ue, _ := upstream.As(err)
	g.Expect(ue.Status).To(Equal(404), "Azure's DeploymentNotFound")
}
