package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/test/fakeupstream"
	"github.com/modelgate/modelgate/test/framework"
)

// noOpenReservation checks that nothing of the account's key is still held
// by a reservation: every job's reservation was settled or refunded.
func noOpenReservation(g Gomega, a *framework.Account) {
	h, err := stack.Ledger.TokenHolds(context.Background(), a.Token.Status.TokenID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Reserved).To(BeZero(), "no reservation is left open")
}

// answerByLine answers a chat line "line N" with "Answer to line N.", and
// refuses the line "line <refuse>" (-1: none) as the API refuses a bad
// request.
func answerByLine(usage fakeupstream.Usage, refuse int) func(fakeupstream.Request) fakeupstream.Reply {
	return func(r fakeupstream.Request) fakeupstream.Reply {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(r.Body, &body)
		if len(body.Messages) == 0 {
			return fakeupstream.Reply{Status: 400, ErrorMessage: "no messages"}
		}
		content := body.Messages[0].Content
		if refuse >= 0 && content == fmt.Sprintf("line %d", refuse) {
			return fakeupstream.Reply{Status: 400, ErrorMessage: "the fake refuses this line"}
		}
		return fakeupstream.Reply{Text: "Answer to " + content + ".", Usage: usage}
	}
}

// runningUpstreamBatch submits n chat lines with the OpenAI SDK to a route
// whose fake upstream runs them as a batch job, one line per 150 ms, each
// answered with usage, and returns once three lines ran; ran counts the
// lines the fake ran.
func runningUpstreamBatch(t testing.TB, g Gomega, name string, n int, usage fakeupstream.Usage) (acct *framework.Account, c openai.Client, fake *fakeupstream.Server, b *openai.Batch, ran func() int) {
	model := uniqueModel(name)
	fake = startFake(t, "openai")
	fake.Handle(answerByLine(usage, -1))
	fake.SetBatchLineDelay(150 * time.Millisecond)
	textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model))
	acct = newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
	c = openaiClient(acct.Key)
	b = submitChatBatch(g, context.Background(), c, model, n, 256)
	ran = func() int {
		sum := 0
		for i := range n {
			sum += fake.BatchLineRuns(batches.RequestID(b.ID, int64(i+1)))
		}
		return sum
	}
	g.Eventually(ran, framework.LongTimeout, framework.Interval).Should(BeNumerically(">=", 3))
	return acct, c, fake, b, ran
}

// Where the route's upstream has a batch API of its own, a batch's lines go
// there as jobs (status.execution Upstream): the fakes implement OpenAI's
// Batch API and Anthropic's Message Batches from their references, and run
// each job's lines through their scripted handlers.
var _ = Describe("Batches executed on the upstream's batch API", func() {
	lineUsage := fakeupstream.Usage{InputTokens: 1000, OutputTokens: 200}
	const batchPrice = 1500 // textQuota(1000, 200) = 3000, at the default batch ratio 0.5

	It("OpenAI SDK: one upstream job, one usage row per answered line at the batch price, the refused line in the error file", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-upstream")
		fake := startFake(t, "openai")
		const n, refused = 12, 7
		fake.Handle(answerByLine(lineUsage, refused))
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		b := submitChatBatch(g, ctx, c, model, n, 256)
		b = waitBatch(g, ctx, c, b.ID, "completed")
		g.Expect(b.RequestCounts.Total).To(Equal(int64(n)))
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(n - 1)))
		g.Expect(b.RequestCounts.Failed).To(Equal(int64(1)))

		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(cr.Status.Execution).To(Equal(v1.BatchExecutionUpstream))
		g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
		job := cr.Status.UpstreamJobs[0]
		g.Expect(job.Backend).To(Equal("up"))
		g.Expect(job.Lines).To(Equal(int64(n)))
		g.Expect(fake.BatchesCreated()).To(Equal(1), "one upstream job")
		g.Expect(fake.BatchStatus(job.ID)).To(Equal("completed"))
		for i := range n {
			g.Expect(fake.BatchLineRuns(batches.RequestID(b.ID, int64(i+1)))).To(Equal(1), "line %d ran once upstream", i)
		}

		out := fileLines(g, c, b.OutputFileID)
		g.Expect(out).To(HaveLen(n - 1))
		for _, o := range out {
			g.Expect(o.Response.StatusCode).To(Equal(200))
			var cc openai.ChatCompletion
			g.Expect(json.Unmarshal(o.Response.Body, &cc)).To(Succeed())
			g.Expect(cc.Model).To(Equal(model), "the client's model name, not the upstream's")
			num := strings.TrimPrefix(o.CustomID, "r")
			g.Expect(cc.Choices[0].Message.Content).To(Equal("Answer to line " + num + "."))
			g.Expect(cc.Usage.PromptTokens).To(Equal(lineUsage.InputTokens))
		}
		errs := fileLines(g, c, b.ErrorFileID)
		g.Expect(errs).To(HaveLen(1))
		g.Expect(errs[0].CustomID).To(Equal(fmt.Sprintf("r%d", refused)))
		g.Expect(errs[0].Response.StatusCode).To(Equal(400))
		g.Expect(string(errs[0].Response.Body)).To(ContainSubstring("the fake refuses this line"), "the upstream's own error")

		rows := usageRows(t, acct, n-1)
		for _, r := range rows {
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice), "the batch price")
			g.Expect(r.ModelName).To(Equal(model))
		}
		sum := rowsSum(rows)
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum), "the batch's cost is the sum of its rows")
		ledgerUsed(t, acct, int64(sum))
		noOpenReservation(g, acct)
	})

	It("Anthropic SDK: a message batch runs as one upstream message batch, results in the client's model, exact rows", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("msgbatch-upstream")
		fake := startFake(t, "anthropic")
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			prompt := string(r.Body)
			for _, id := range []string{"alpha", "beta", "gamma"} {
				if strings.Contains(prompt, "prompt "+id) {
					return fakeupstream.Reply{Text: "Answer for " + id + ".", Usage: lineUsage}
				}
			}
			return fakeupstream.Reply{Status: 400, ErrorMessage: "the fake refuses this prompt"}
		})
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "upstream-"+model))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)

		req := func(id, prompt string) anthropic.MessageBatchNewParamsRequest {
			return anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: anthropic.MessageBatchNewParamsRequestParams{
				Model: anthropic.Model(model), MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
			}}
		}
		mb, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: []anthropic.MessageBatchNewParamsRequest{
			req("alpha", "prompt alpha"), req("beta", "prompt beta"), req("gamma", "prompt gamma"), req("refused", "please refuse"),
		}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			mb, err = c.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(mb.ProcessingStatus)).To(Equal("ended"))
		}, framework.LongTimeout, framework.Interval).Should(Succeed())
		g.Expect(mb.RequestCounts.Succeeded).To(Equal(int64(3)))
		g.Expect(mb.RequestCounts.Errored).To(Equal(int64(1)))

		cr := batchCR(g, acct.Namespace, mb.ID)
		g.Expect(cr.Status.Execution).To(Equal(v1.BatchExecutionUpstream))
		g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
		g.Expect(fake.MessageBatchesCreated()).To(Equal(1), "one upstream message batch")
		for i := range 4 {
			g.Expect(fake.MessageBatchLineRuns(batches.RequestID(mb.ID, int64(i+1)))).To(Equal(1), "request %d ran once upstream", i)
		}

		results := map[string]anthropic.MessageBatchResultUnion{}
		s := c.Messages.Batches.ResultsStreaming(ctx, mb.ID, anthropic.MessageBatchResultsParams{})
		for s.Next() {
			results[s.Current().CustomID] = s.Current().Result
		}
		g.Expect(s.Err()).NotTo(HaveOccurred())
		g.Expect(results).To(HaveLen(4))
		for _, id := range []string{"alpha", "beta", "gamma"} {
			r := results[id]
			g.Expect(r.Type).To(Equal("succeeded"), id)
			g.Expect(r.Message.Content[0].Text).To(Equal("Answer for "+id+"."), id)
			g.Expect(string(r.Message.Model)).To(Equal(model), "the client's model name, not the upstream's")
			g.Expect(r.Message.Usage.InputTokens).To(Equal(lineUsage.InputTokens))
		}
		g.Expect(results["refused"].Type).To(Equal("errored"))
		g.Expect(results["refused"].Error.Error.Message).To(ContainSubstring("the fake refuses this prompt"))

		rows := usageRows(t, acct, 3)
		for _, r := range rows {
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice))
		}
		sum := rowsSum(rows)
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum))
		ledgerUsed(t, acct, int64(sum))
		noOpenReservation(g, acct)
	})

	It("OpenAI SDK: a batch cancelled midway cancels its upstream job and bills only the lines the job ran", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		const n = 40
		acct, c, fake, b, ran := runningUpstreamBatch(t, g, "batch-upstream-cancel", n, lineUsage)
		cancelled, err := c.Batches.Cancel(ctx, b.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(cancelled.Status)).To(Equal("cancelling"))
		b = waitBatch(g, ctx, c, b.ID, "cancelled")

		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
		g.Expect(fake.BatchStatus(cr.Status.UpstreamJobs[0].ID)).To(Equal("cancelled"), "the upstream job was cancelled")
		done := ran()
		figures(t, "upstream lines run before the cancel", "%d of %d lines ran upstream", done, n)
		g.Expect(done).To(BeNumerically("<", n), "the cancel stopped the job")
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(done)))
		g.Expect(b.RequestCounts.Failed).To(Equal(int64(n - done)))
		errs := fileLines(g, c, b.ErrorFileID)
		g.Expect(errs).To(HaveLen(n - done))
		for _, o := range errs {
			g.Expect(o.Response).To(BeNil())
			g.Expect(o.Error.Code).To(Equal(batches.CodeCancelled))
		}
		rows := usageRows(t, acct, done)
		sum := rowsSum(rows)
		g.Expect(sum).To(Equal(billing.Quota(done * batchPrice)))
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum))
		ledgerUsed(t, acct, int64(sum))
		noOpenReservation(g, acct)
	})

	It("kubectl delete of a running upstream batch: the API answers 404 at once, the job is cancelled upstream, the lines it ran are billed once, then the Batch goes", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		const n = 40
		acct, c, fake, b, ran := runningUpstreamBatch(t, g, "batch-upstream-delete", n, lineUsage)
		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(cr.Finalizers).To(ContainElement("modelgate.io/upstream-job"))
		g.Expect(cr.Status.UpstreamJobs).To(HaveLen(1))
		job := cr.Status.UpstreamJobs[0].ID
		g.Expect(stack.Client.Delete(ctx, cr)).To(Succeed())

		_, err := c.Batches.Get(ctx, b.ID)
		var apiErr *openai.Error
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "got %v", err)
		g.Expect(apiErr.StatusCode).To(Equal(404), "a deleted batch is gone for its tenant, though its job is still being stopped")
		g.Eventually(func() bool {
			err := stack.Client.Get(ctx, client.ObjectKeyFromObject(cr), &v1.Batch{})
			return apierrors.IsNotFound(err)
		}, framework.LongTimeout, framework.Interval).Should(BeTrue(), "the Batch goes once its job is stopped")
		g.Expect(fake.BatchStatus(job)).To(Equal("cancelled"))
		done := ran()
		figures(t, "upstream lines run before the deletion", "%d of %d lines ran upstream", done, n)
		g.Expect(done).To(BeNumerically("<", n), "the cancel stopped the job")
		rows := usageRows(t, acct, done)
		g.Expect(rowsSum(rows)).To(Equal(billing.Quota(done * batchPrice)))
		ledgerUsed(t, acct, int64(done*batchPrice))
		noOpenReservation(g, acct)
	})

	It("OpenAI SDK: a key whose quota covers part of the batch's estimates runs it as several jobs, each line once", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-upstream-jobs")
		fake := startFake(t, "openai")
		small := fakeupstream.Usage{InputTokens: 10, OutputTokens: 20}
		fake.Handle(answerByLine(small, -1))
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model))
		// Each line reserves its output up to max_tokens (256) at the batch
		// price, about 1 000 quota, and costs a tenth of that: the key's
		// quota holds a handful of lines' estimates at a time.
		q := int64(6000)
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{Quota: &q})
		c := openaiClient(acct.Key)

		const n = 20
		b := submitChatBatch(g, ctx, c, model, n, 256)
		b = waitBatch(g, ctx, c, b.ID, "completed")
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(n)))

		cr := batchCR(g, acct.Namespace, b.ID)
		figures(t, "upstream jobs of a batch on a small key", "%d lines in %d jobs", n, fake.BatchesCreated())
		g.Expect(fake.BatchesCreated()).To(BeNumerically(">=", 2), "the quota held part of the batch at a time")
		var inJobs int64
		for _, j := range cr.Status.UpstreamJobs {
			inJobs += j.Lines
		}
		g.Expect(inJobs).To(Equal(int64(n)))
		for i := range n {
			g.Expect(fake.BatchLineRuns(batches.RequestID(b.ID, int64(i+1)))).To(Equal(1), "line %d ran once", i)
		}
		rows := usageRows(t, acct, n)
		sum := rowsSum(rows)
		g.Expect(billing.Quota(cr.Status.Cost.Quota)).To(Equal(sum))
		ledgerUsed(t, acct, int64(sum))
		noOpenReservation(g, acct)
	})

	It("OpenAI SDK: an OpenAI-compatible upstream without a batch API runs the batch through the gateway instead", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-no-batch-api")
		fake := fakeupstream.NewOpenAIWithoutBatch()
		t.Cleanup(fake.Close)
		fake.Handle(answerByLine(lineUsage, -1))
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "openai", fake.URL, fake.Key(), "upstream-"+model))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		const n = 6
		b := submitChatBatch(g, ctx, c, model, n, 256)
		b = waitBatch(g, ctx, c, b.ID, "completed")
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(n)))
		cr := batchCR(g, acct.Namespace, b.ID)
		g.Expect(cr.Status.Execution).To(Equal(v1.BatchExecutionGateway))
		g.Expect(cr.Status.UpstreamJobs).To(BeEmpty())
		rows := usageRows(t, acct, n)
		for _, r := range rows {
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice))
		}
		ledgerUsed(t, acct, int64(rowsSum(rows)))
		noOpenReservation(g, acct)
	})

	It("OpenAI SDK: chat lines on a route to Anthropic run as one message batch, answered as chat completions", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-upstream-translated")
		fake := startFake(t, "anthropic")
		fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
			m := linePrompt.FindSubmatch(r.Body)
			if m == nil {
				return fakeupstream.Reply{Status: 400, ErrorMessage: "no line in the prompt"}
			}
			return fakeupstream.Reply{Text: "Answer to line " + string(m[1]) + ".", Usage: lineUsage}
		})
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "up", "anthropic", fake.URL, fake.Key(), "upstream-"+model))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)

		const n = 5
		b := submitChatBatch(g, ctx, c, model, n, 256)
		b = waitBatch(g, ctx, c, b.ID, "completed")
		g.Expect(b.RequestCounts.Completed).To(Equal(int64(n)))
		g.Expect(fake.MessageBatchesCreated()).To(Equal(1), "one upstream message batch")
		submitted := 0
		for _, r := range fake.Requests() {
			if strings.HasSuffix(r.Path, "/v1/messages/batches") && r.Method == "POST" {
				submitted++
				g.Expect(string(r.Body)).To(ContainSubstring(`"model":"upstream-`+model+`"`), "the upstream's model in each request")
				g.Expect(string(r.Body)).To(ContainSubstring(`"max_tokens":256`))
			}
		}
		g.Expect(submitted).To(Equal(1))
		out := fileLines(g, c, b.OutputFileID)
		g.Expect(out).To(HaveLen(n))
		for _, o := range out {
			var cc openai.ChatCompletion
			g.Expect(json.Unmarshal(o.Response.Body, &cc)).To(Succeed())
			g.Expect(cc.Object).To(BeEquivalentTo("chat.completion"), "translated to the client's protocol")
			g.Expect(cc.Model).To(Equal(model))
			g.Expect(cc.Choices[0].Message.Content).To(Equal("Answer to line " + strings.TrimPrefix(o.CustomID, "r") + "."))
			g.Expect(cc.Usage.PromptTokens).To(Equal(lineUsage.InputTokens))
			g.Expect(cc.Usage.CompletionTokens).To(Equal(lineUsage.OutputTokens))
		}
		rows := usageRows(t, acct, n)
		for _, r := range rows {
			g.Expect(r.Quota).To(BeEquivalentTo(batchPrice))
		}
		ledgerUsed(t, acct, int64(rowsSum(rows)))
		noOpenReservation(g, acct)
	})
})
