package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/framework"
)

// A batch run to its end: the controller runs the lines through the
// gateway's data path, the SDK downloads the output file.
var _ = Describe("Batches run end to end", func() {
	It("OpenAI SDK: a batch completes and its output file is downloaded, kept as output_expires_after says, each line billed once at the batch price", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-run")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated-openai"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		const n = 5
		keep := func(seconds int64) func(*openai.BatchNewParams) {
			return func(p *openai.BatchNewParams) {
				p.OutputExpiresAfter = openai.BatchNewParamsOutputExpiresAfter{Seconds: seconds}
			}
		}
		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:    openai.File(strings.NewReader(`{"custom_id":"r","method":"POST","url":"/v1/chat/completions","body":{"model":"`+model+`"}}`), "r.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch,
		})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h, OutputExpiresAfter: openai.BatchNewParamsOutputExpiresAfter{Seconds: 60}})
		var apiErr *openai.Error
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "got %v", err)
		g.Expect(apiErr.StatusCode).To(Equal(400))
		g.Expect(apiErr.Param).To(Equal("output_expires_after.seconds"))

		b := submitChatBatch(g, ctx, c, model, n, 32, keep(7200))

		g.Eventually(func(g Gomega) {
			b, err = c.Batches.Get(ctx, b.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b.Status)).To(Equal("completed"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		g.Expect(b.RequestCounts.Total).To(Equal(int64(n)))
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(n)))
		g.Expect(b.RequestCounts.Failed).To(BeZero())
		g.Expect(b.CompletedAt).To(BeNumerically(">", 0))
		g.Expect(b.OutputFileID).To(HavePrefix("file-"))
		g.Expect(b.ErrorFileID).To(BeEmpty())
		of, err := c.Files.Get(ctx, b.OutputFileID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(of.ExpiresAt-of.CreatedAt).To(Equal(int64(7200)), "the output file is kept as output_expires_after says")

		resp, err := c.Files.Content(ctx, b.OutputFileID)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		var out []batches.OutputLine
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var o batches.OutputLine
			g.Expect(json.Unmarshal(sc.Bytes(), &o)).To(Succeed())
			out = append(out, o)
		}
		g.Expect(sc.Err()).NotTo(HaveOccurred())
		g.Expect(out).To(HaveLen(n))
		for i, o := range out {
			g.Expect(o.CustomID).To(Equal(fmt.Sprintf("r%d", i)))
			g.Expect(o.Response.StatusCode).To(Equal(200))
			var cc openai.ChatCompletion
			g.Expect(json.Unmarshal(o.Response.Body, &cc)).To(Succeed())
			g.Expect(cc.Choices).NotTo(BeEmpty())
		}

		rows := usageRows(t, acct, n)
		var sum billing.Quota
		var in, outTokens int64
		for _, r := range rows {
			sum += r.Quota
			in, outTokens = in+r.PromptTokens, outTokens+r.CompletionTokens
			alone := textQuota(r.PromptTokens, r.CompletionTokens)
			g.Expect(int64(r.Quota)*2).To(BeNumerically("~", alone, 2), "a line costs half the request sent alone")
		}
		cr := &v1.Batch{}
		g.Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: strings.ReplaceAll(b.ID, "_", "-")}, cr)).To(Succeed())
		g.Expect(cr.Status.Cost).NotTo(BeNil())
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum), "the batch's cost is the sum of its usage rows")
		ledgerUsed(t, acct, int64(sum))
		g.Expect(b.Model).To(Equal(model))
		g.Expect(b.Usage.InputTokens).To(Equal(in), "the batch's usage is its rows' tokens")
		g.Expect(b.Usage.OutputTokens).To(Equal(outTokens))
		g.Expect(b.Usage.TotalTokens).To(Equal(in + outTokens))
		g.Expect(in).To(BeNumerically(">", 0))
	})
})

// submitChatBatch uploads n chat lines of model ("line <i>", custom IDs
// r0…r<n-1>, each asking for maxTokens) and submits them as a batch.
// waitBatch waits until the batch id is in status and returns it.
func waitBatch(g Gomega, ctx context.Context, c openai.Client, id, status string) *openai.Batch {
	var b *openai.Batch
	g.Eventually(func(g Gomega) {
		var err error
		b, err = c.Batches.Get(ctx, id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b.Status)).To(Equal(status))
	}, framework.LongTimeout, framework.Interval).Should(Succeed())
	return b
}

func submitChatBatch(g Gomega, ctx context.Context, c openai.Client, model string, n, maxTokens int, opts ...func(*openai.BatchNewParams)) *openai.Batch {
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":%d,"messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, model, maxTokens, i)
	}
	f, err := c.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(strings.NewReader(lines.String()), "requests.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	g.Expect(err).NotTo(HaveOccurred())
	params := openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
	}
	for _, o := range opts {
		o(&params)
	}
	b, err := c.Batches.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}
