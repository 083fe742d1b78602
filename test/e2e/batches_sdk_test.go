package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// batchCR reads the Batch resource a public batch ID names.
func batchCR(g Gomega, namespace, id string) *v1.Batch {
	b := &v1.Batch{}
	g.Expect(stack.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace,
		Name: strings.ReplaceAll(id, "_", "-")}, b)).To(Succeed())
	return b
}

// fileLines downloads a result file with the OpenAI SDK and decodes its
// JSONL lines.
func fileLines(g Gomega, c openai.Client, id string) []batches.OutputLine {
	resp, err := c.Files.Content(context.Background(), id)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var out []batches.OutputLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var o batches.OutputLine
		g.Expect(json.Unmarshal(sc.Bytes(), &o)).To(Succeed(), sc.Text())
		out = append(out, o)
	}
	g.Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// rowsSum is the quota of usage rows.
func rowsSum(rows []store.UsageRecord) billing.Quota {
	var sum billing.Quota
	for _, r := range rows {
		sum += r.Quota
	}
	return sum
}

// The batch's lines are answered by fakes of the vendors' APIs, so what
// the upstream said (an answer, a refusal, a slow answer) is scripted and
// the results, the ledger and the batch's cost are checked exactly.
var _ = Describe("Batches with the official SDKs against fake upstreams", func() {
	// Every line's usage is the same, so each line's price is known: 1000
	// input and 200 output tokens cost 3000 quota sent alone
	// (textQuota), 1500 in a batch (the rule's default batch ratio, 0.5).
	lineUsage := fakeupstream.Usage{InputTokens: 1000, OutputTokens: 200}
	const alonePrice, batchPrice = 3000, 1500

	It("Anthropic SDK: a message batch runs to its end, one line refused by the upstream, results, ledger and cost", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		g.Expect(textQuota(lineUsage.InputTokens, lineUsage.OutputTokens)).To(BeEquivalentTo(alonePrice))
		model := uniqueModel("msgbatch-run")
		fake := startFake(t, "anthropic")
		// The lines run concurrently, so the answer is chosen by the
		// prompt, not by the order of arrival.
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			prompt := string(r.Body)
			if strings.Contains(prompt, "please refuse") {
				return fakeupstream.Reply{Status: 400, ErrorType: "invalid_request_error",
					ErrorMessage: "messages.0.content.0.text: the fake refuses this prompt"}
			}
			for _, id := range []string{"alpha", "beta", "gamma", "alone"} {
				if strings.Contains(prompt, "prompt "+id) {
					return fakeupstream.Reply{Text: "Answer for " + id + ".", Usage: lineUsage}
				}
			}
			return fakeupstream.Reply{Status: 500, ErrorMessage: "unexpected prompt"}
		})
		textModel(t, framework.SystemNamespace, model, gatewayBatches(fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "upstream-"+model)))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)

		req := func(id, prompt string) anthropic.MessageBatchNewParamsRequest {
			return anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: anthropic.MessageBatchNewParamsRequestParams{
				Model: anthropic.Model(model), MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
			}}
		}
		succeeded := []string{"alpha", "beta", "gamma"}
		reqs := []anthropic.MessageBatchNewParamsRequest{}
		for _, id := range succeeded {
			reqs = append(reqs, req(id, "prompt "+id))
		}
		reqs = append(reqs, req("refused", "please refuse"))
		mb, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mb.RequestCounts.Processing).To(Equal(int64(4)))

		g.Eventually(func(g Gomega) {
			mb, err = c.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(mb.ProcessingStatus)).To(Equal("ended"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		g.Expect(mb.RequestCounts.Succeeded).To(Equal(int64(3)))
		g.Expect(mb.RequestCounts.Errored).To(Equal(int64(1)))
		g.Expect(mb.RequestCounts.Processing).To(BeZero())
		g.Expect(mb.RequestCounts.Canceled).To(BeZero())
		g.Expect(mb.RequestCounts.Expired).To(BeZero())
		g.Expect(mb.EndedAt.IsZero()).To(BeFalse())
		g.Expect(mb.ResultsURL).To(HaveSuffix("/v1/messages/batches/" + mb.ID + "/results"))
		g.Expect(fake.Count()).To(Equal(4), "each line sent once")

		results := map[string]anthropic.MessageBatchResultUnion{}
		s := c.Messages.Batches.ResultsStreaming(ctx, mb.ID, anthropic.MessageBatchResultsParams{})
		for s.Next() {
			r := s.Current()
			g.Expect(results).NotTo(HaveKey(r.CustomID), "one result per request")
			results[r.CustomID] = r.Result
		}
		g.Expect(s.Err()).NotTo(HaveOccurred())
		g.Expect(s.Close()).To(Succeed())
		g.Expect(results).To(HaveLen(4))
		for _, id := range succeeded {
			r := results[id]
			g.Expect(r.Type).To(Equal("succeeded"), id)
			g.Expect(r.Message.Content).To(HaveLen(1), id)
			g.Expect(r.Message.Content[0].Text).To(Equal("Answer for "+id+"."), id)
			g.Expect(string(r.Message.Model)).To(Equal(model), "the client's model name, not the upstream's")
			g.Expect(string(r.Message.StopReason)).To(Equal("end_turn"))
			g.Expect(r.Message.Usage.InputTokens).To(Equal(lineUsage.InputTokens))
			g.Expect(r.Message.Usage.OutputTokens).To(Equal(lineUsage.OutputTokens))
		}
		refused := results["refused"]
		g.Expect(refused.Type).To(Equal("errored"))
		g.Expect(refused.Error.Type).To(BeEquivalentTo("error"))
		g.Expect(refused.Error.Error.Type).To(BeEquivalentTo("invalid_request_error"))
		g.Expect(refused.Error.Error.Message).To(ContainSubstring("the fake refuses this prompt"), "the upstream's error")

		// The ledger: one row per succeeded line at the batch price, none
		// for the refused one; the same request sent alone costs twice as
		// much.
		rows := usageRows(t, acct, 3)
		for _, r := range rows {
			g.Expect(r.ModelName).To(Equal(model))
			g.Expect(r.PromptTokens).To(Equal(lineUsage.InputTokens))
			g.Expect(r.CompletionTokens).To(Equal(lineUsage.OutputTokens))
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice), "half the PriceRule's price")
		}
		sum := rowsSum(rows)
		cr := batchCR(g, acct.Namespace, mb.ID)
		g.Expect(cr.Status.Cost).NotTo(BeNil())
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum), "the batch's cost is the sum of its usage rows")
		g.Expect(cr.Status.RequestCounts).To(Equal(v1.BatchRequestCounts{Total: 4, Completed: 3, Failed: 1}))
		ledgerUsed(t, acct, int64(sum))

		alone := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		v := ask(t, "messages", false, alone.Key, model, "prompt alone")
		g.Expect(v.Text).To(Equal("Answer for alone."))
		aloneRows := usageRows(t, alone, 1)
		g.Expect(aloneRows[0].Quota).To(BeEquivalentTo(alonePrice))
		g.Expect(aloneRows[0].Quota).To(Equal(2*rows[0].Quota), "a line costs half the request sent alone")

		del, err := c.Messages.Batches.Delete(ctx, mb.ID, anthropic.MessageBatchDeleteParams{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(del.ID).To(Equal(mb.ID))
		g.Expect(string(del.Type)).To(Equal("message_batch_deleted"))
		_, err = c.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{})
		var apiErr *anthropic.Error
		g.Expect(err).To(BeAssignableToTypeOf(apiErr))
		g.Expect(err.(*anthropic.Error).StatusCode).To(Equal(404), "a deleted batch")
		usageRows(t, acct, 3) // deleting the batch leaves its usage in the ledger
	})

	It("OpenAI SDK: a batch cancelled midway keeps the lines that ran, lists the rest as batch_cancelled, bills only what ran", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-cancel")
		fake := startFake(t, "openai")
		// The first four requests (one per worker, the default concurrency)
		// are answered at once; the next ones are held until the cancel
		// has reached the controller, so the batch is cancelled with lines
		// answered, lines running and lines not started.
		const answeredFirst, workers = 4, 4
		hold := make(chan struct{})
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(hold) }) }
		DeferCleanup(release) // before the fake closes: a held handler would keep Close waiting
		var seen atomic.Int64
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			if seen.Add(1) > answeredFirst {
				<-hold
			}
			var body struct {
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(r.Body, &body)
			return fakeupstream.Reply{Text: "Answer to " + body.Messages[0].Content + ".", Usage: lineUsage}
		})
		textModel(t, framework.SystemNamespace, model, gatewayBatches(fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model)))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		const n = 20
		b := submitChatBatch(g, ctx, c, model, n, 256)
		var err error

		// Four lines answered and four held: every worker is busy.
		g.Eventually(fake.Count, framework.LongTimeout, framework.Interval).Should(Equal(answeredFirst + workers))
		cancelled, err := c.Batches.Cancel(ctx, b.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(cancelled.Status)).To(Equal("cancelling"))
		// The controller reads the cancel from its cache before each line.
		g.Eventually(func(g Gomega) {
			cur := &v1.Batch{}
			g.Expect(stack.Cache.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: strings.ReplaceAll(b.ID, "_", "-")}, cur)).To(Succeed())
			g.Expect(cur.Annotations).To(HaveKey(batches.CancelAnnotation))
		}, framework.Timeout, framework.Interval).Should(Succeed())
		release()

		g.Eventually(func(g Gomega) {
			b, err = c.Batches.Get(ctx, b.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b.Status)).To(Equal("cancelled"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		g.Expect(b.CancellingAt).To(BeNumerically(">", 0))
		g.Expect(b.CancelledAt).To(BeNumerically(">=", b.CancellingAt))
		// The held lines finish; the feeder may have taken one more line
		// before the cancel reached it (it waits for a free worker after
		// checking), no other starts.
		ran := fake.Count()
		figures(t, "lines run before the cancel", "%d of %d lines ran", ran, n)
		g.Expect(ran).To(BeNumerically(">=", answeredFirst+workers))
		g.Expect(ran).To(BeNumerically("<=", answeredFirst+workers+1))
		g.Expect(b.RequestCounts.Total).To(Equal(int64(n)))
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(ran)))
		g.Expect(b.RequestCounts.Failed).To(Equal(int64(n - ran)))

		g.Expect(b.OutputFileID).To(HavePrefix("file-"))
		out := fileLines(g, c, b.OutputFileID)
		g.Expect(out).To(HaveLen(ran), "the output file has the lines that ran")
		for i, o := range out {
			g.Expect(o.CustomID).To(Equal(fmt.Sprintf("r%d", i)), "lines run in file order")
			g.Expect(o.Error).To(BeNil())
			g.Expect(o.Response.StatusCode).To(Equal(200))
			var cc openai.ChatCompletion
			g.Expect(json.Unmarshal(o.Response.Body, &cc)).To(Succeed())
			g.Expect(cc.Choices).To(HaveLen(1))
			g.Expect(cc.Choices[0].Message.Content).To(Equal(fmt.Sprintf("Answer to line %d.", i)))
		}
		g.Expect(b.ErrorFileID).To(HavePrefix("file-"))
		errs := fileLines(g, c, b.ErrorFileID)
		g.Expect(errs).To(HaveLen(n - ran))
		for i, o := range errs {
			g.Expect(o.CustomID).To(Equal(fmt.Sprintf("r%d", ran+i)))
			g.Expect(o.Response).To(BeNil(), "never ran")
			g.Expect(o.Error).NotTo(BeNil())
			g.Expect(o.Error.Code).To(Equal(batches.CodeCancelled))
		}

		rows := usageRows(t, acct, ran)
		for _, r := range rows {
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice), "the batch price")
		}
		sum := rowsSum(rows)
		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(cr.Status.State).To(Equal(v1.BatchCancelled))
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum), "the batch's cost is the sum of its usage rows")
		ledgerUsed(t, acct, int64(sum))
		g.Expect(fake.Count()).To(Equal(ran), "nothing was sent after the batch ended")
	})
	It("OpenAI SDK: a batch larger than its workers on a key with quota for part of it: refusals in the error file, nothing billed past the quota", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-quota")
		fake := startFake(t, "openai")
		// The usage is what a real upstream would report for these lines:
		// a few input tokens, and no more output than the max_tokens it was
		// sent (the gateway lowers it to what the money left pays for).
		// The reservation (input by the body's size, output up to
		// max_tokens) then covers each line's cost.
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			var body struct {
				MaxTokens           int64 `json:"max_tokens"`
				MaxCompletionTokens int64 `json:"max_completion_tokens"`
			}
			_ = json.Unmarshal(r.Body, &body)
			out := int64(200)
			for _, m := range []int64{body.MaxTokens, body.MaxCompletionTokens} {
				if m > 0 {
					out = min(out, m)
				}
			}
			return fakeupstream.Reply{Text: "An answer.", Usage: fakeupstream.Usage{InputTokens: 10, OutputTokens: out}}
		})
		textModel(t, framework.SystemNamespace, model, gatewayBatches(fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model)))
		// Quota for a few lines at the batch price: each line reserves
		// before it runs, so the lines that do not fit are refused.
		const keyQuota = 5000
		q := int64(keyQuota)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
		c := openaiClient(acct.Key)

		const n = 12 // the default concurrency (4) times 3
		b := submitChatBatch(g, ctx, c, model, n, 256)
		var err error
		g.Eventually(func(g Gomega) {
			b, err = c.Batches.Get(ctx, b.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b.Status)).To(Equal("completed"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())

		counts := b.RequestCounts
		figures(t, "lines run on a key with quota for part of the batch", "%d of %d lines ran, %d refused", counts.Completed, n, counts.Failed)
		g.Expect(counts.Total).To(Equal(int64(n)))
		g.Expect(counts.Completed).To(BeNumerically(">", 0))
		g.Expect(counts.Failed).To(BeNumerically(">", 0), "the key ran out")
		g.Expect(counts.Completed + counts.Failed).To(Equal(int64(n)))
		g.Expect(int64(fake.Count())).To(Equal(counts.Completed), "a refused line is never sent")

		out := fileLines(g, c, b.OutputFileID)
		g.Expect(out).To(HaveLen(int(counts.Completed)))
		errs := fileLines(g, c, b.ErrorFileID)
		g.Expect(errs).To(HaveLen(int(counts.Failed)))
		for _, e := range errs {
			g.Expect(e.Error).To(BeNil(), "the line was answered, by the gateway")
			g.Expect(e.Response).NotTo(BeNil())
			g.Expect(e.Response.StatusCode).To(Or(Equal(429), Equal(402)))
			var body struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			g.Expect(json.Unmarshal(e.Response.Body, &body)).To(Succeed(), string(e.Response.Body))
			g.Expect(body.Error.Code).To(Equal("insufficient_quota"), string(e.Response.Body))
			g.Expect(body.Error.Message).NotTo(BeEmpty())
			g.Expect(string(e.Response.Body)).NotTo(ContainSubstring(acct.Key), "the key is never echoed")
		}

		rows := usageRows(t, acct, int(counts.Completed))
		for _, r := range rows {
			g.Expect(r.PromptTokens).To(BeEquivalentTo(10))
			g.Expect(int64(r.Quota)*2).To(BeNumerically("~", textQuota(r.PromptTokens, r.CompletionTokens), 2), "the batch price")
		}
		sum := rowsSum(rows)
		g.Expect(sum).To(BeNumerically("<=", keyQuota), "nothing over the key's quota is billed")
		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum), "the batch's cost is the sum of its usage rows")
		ledgerUsed(t, acct, int64(sum))
	})
	It("OpenAI SDK: a line the key pays for at the batch price is reserved at it: its max_tokens reach the upstream whole", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-reserve")
		fake := startFake(t, "openai")
		fake.SetDefault(fakeupstream.Reply{Text: "An answer.", Usage: fakeupstream.Usage{InputTokens: 10, OutputTokens: 20}})
		textModel(t, framework.SystemNamespace, model, gatewayBatches(fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model)))
		// The line's body is about 130 bytes (about 45 input tokens by the
		// estimate) and asks for 256 output tokens: about 2100 quota
		// reserved at the full price, about 1050 at the batch price. 1500
		// pays for the line in a batch; at the full price it would be cut
		// to what 1500 pays for.
		q := int64(1500)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
		c := openaiClient(acct.Key)
		line := fmt.Sprintf(`{"custom_id":"r0","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":256,"messages":[{"role":"user","content":"one line"}]}}`+"\n", model)
		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:    openai.File(strings.NewReader(line), "requests.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch,
		})
		g.Expect(err).NotTo(HaveOccurred())
		b, err := c.Batches.New(ctx, openai.BatchNewParams{
			InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			b, err = c.Batches.Get(ctx, b.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b.Status)).To(Equal("completed"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(1)))
		g.Expect(fake.Count()).To(Equal(1))
		sent := fake.Last().JSON()
		maxTokens := sent["max_tokens"]
		if maxTokens == nil {
			maxTokens = sent["max_completion_tokens"]
		}
		g.Expect(maxTokens).To(BeEquivalentTo(256), "the line's own max_tokens, not cut to what the full price would leave")
		rows := usageRows(t, acct, 1)
		g.Expect(int64(rows[0].Quota)*2).To(BeNumerically("~", textQuota(10, 20), 2), "the batch price")
	})
})
