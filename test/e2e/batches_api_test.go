package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/test/framework"
)

// The batch is accepted and read back here; running it is the batch
// controller's, so these specs do not wait for an outcome.
var _ = Describe("Batch APIs with the official SDKs", func() {
	batchOf := func(g Gomega, namespace, id string) *v1.Batch {
		b := &v1.Batch{}
		g.Expect(stack.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace,
			Name: strings.ReplaceAll(id, "_", "-")}, b)).To(Succeed())
		return b
	}

	It("OpenAI SDK files and batches", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-chat")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated-openai"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		other := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c, oc := openaiClient(acct.Key), openaiClient(other.Key)

		var lines strings.Builder
		for i := range 3 {
			fmt.Fprintf(&lines, `{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i, model)
		}
		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:    openai.File(strings.NewReader(lines.String()), "requests.jsonl", "application/jsonl"),
			Purpose: openai.FilePurposeBatch,
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.ID).To(HavePrefix("file-"))
		g.Expect(f.Bytes).To(Equal(int64(lines.Len())))
		g.Expect(string(f.Purpose)).To(Equal("batch"))

		got, err := c.Files.Get(ctx, f.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Filename).To(Equal("requests.jsonl"))
		resp, err := c.Files.Content(ctx, f.ID)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(string(body)).To(Equal(lines.String()))

		_, err = oc.Files.Get(ctx, f.ID)
		var apiErr *openai.Error
		g.Expect(err).To(BeAssignableToTypeOf(apiErr))
		g.Expect(err.(*openai.Error).StatusCode).To(Equal(404), "another tenant's file")

		b, err := c.Batches.New(ctx, openai.BatchNewParams{
			InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"job": "nightly"},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.ID).To(HavePrefix("batch_"))
		g.Expect(string(b.Status)).To(Equal("validating"))
		g.Expect(b.InputFileID).To(Equal(f.ID))
		g.Expect(b.Metadata).To(HaveKeyWithValue("job", "nightly"))

		cr := batchOf(g, acct.Namespace, b.ID)
		g.Expect(cr.Spec.BatchID).To(Equal(b.ID))
		g.Expect(cr.Spec.API).To(Equal("openai"))
		g.Expect(cr.Spec.Endpoint).To(Equal("/v1/chat/completions"))
		g.Expect(cr.Spec.InputFileID).To(Equal(f.ID))
		g.Expect(cr.Spec.TokenName).To(Equal(acct.Token.Name))
		g.Expect(cr.Spec.UserID).To(BeNumerically(">", 0))

		got2, err := c.Batches.Get(ctx, b.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got2.ID).To(Equal(b.ID))
		page, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(10)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Data).To(HaveLen(1))
		g.Expect(page.Data[0].ID).To(Equal(b.ID))
		_, err = oc.Batches.Get(ctx, b.ID)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.(*openai.Error).StatusCode).To(Equal(404), "another tenant's batch")

		cancelled, err := c.Batches.Cancel(ctx, b.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(cancelled.Status)).To(Equal("cancelling"))
		g.Expect(cancelled.CancellingAt).To(BeNumerically(">", 0))
		g.Expect(batchOf(g, acct.Namespace, b.ID).Annotations).To(HaveKey(batches.CancelAnnotation))
	})

	It("OpenAI SDK file upload with expires_after: the expiry is the one asked for; one out of bounds is a 400 and keeps nothing", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		line := `{"custom_id":"r","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[]}}` + "\n"

		f, err := c.Files.New(ctx, openai.FileNewParams{
			File:         openai.File(strings.NewReader(line), "requests.jsonl", "application/jsonl"),
			Purpose:      openai.FilePurposeBatch,
			ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 7200},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.ExpiresAt - f.CreatedAt).To(Equal(int64(7200)))
		got, err := c.Files.Get(ctx, f.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ExpiresAt).To(Equal(f.ExpiresAt), "the expiry is stored, not only answered")

		plain, err := c.Files.New(ctx, openai.FileNewParams{
			File: openai.File(strings.NewReader(line), "plain.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(plain.ExpiresAt-plain.CreatedAt).To(Equal(int64(30*24*3600)), "the default: 30 days")

		_, err = c.Files.New(ctx, openai.FileNewParams{
			File:         openai.File(strings.NewReader(line), "short.jsonl", "application/jsonl"),
			Purpose:      openai.FilePurposeBatch,
			ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 60},
		})
		var apiErr *openai.Error
		g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "got %v", err)
		g.Expect(apiErr.StatusCode).To(Equal(400))
		g.Expect(apiErr.Param).To(Equal("expires_after.seconds"))
		page, err := c.Files.List(ctx, openai.FileListParams{})
		g.Expect(err).NotTo(HaveOccurred())
		names := []string{}
		for _, x := range page.Data {
			names = append(names, x.Filename)
		}
		g.Expect(names).To(ConsistOf("requests.jsonl", "plain.jsonl"), "the refused upload left no file")
	})

	It("Anthropic SDK message batches", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("batch-messages")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := anthropicClient(acct.Key)

		req := func(id string) anthropic.MessageBatchNewParamsRequest {
			return anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: anthropic.MessageBatchNewParamsRequestParams{
				Model: anthropic.Model(model), MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
			}}
		}
		mb, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
			Requests: []anthropic.MessageBatchNewParamsRequest{req("one"), req("two")}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mb.ID).To(HavePrefix("msgbatch_"))
		g.Expect(string(mb.ProcessingStatus)).To(Equal("in_progress"))
		g.Expect(mb.RequestCounts.Processing).To(Equal(int64(2)))
		g.Expect(mb.ExpiresAt.Sub(mb.CreatedAt).Hours()).To(BeNumerically("==", 24))

		cr := batchOf(g, acct.Namespace, mb.ID)
		g.Expect(cr.Spec.API).To(Equal("anthropic"))
		g.Expect(cr.Spec.Endpoint).To(Equal("/v1/messages"))
		g.Expect(cr.Spec.InputFileID).To(HavePrefix("file-"))

		got, err := c.Messages.Batches.Get(ctx, mb.ID, anthropic.MessageBatchGetParams{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ID).To(Equal(mb.ID))
		page, err := c.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(5)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page.Data).To(HaveLen(1))
		g.Expect(page.Data[0].ID).To(Equal(mb.ID))

		cancelled, err := c.Messages.Batches.Cancel(ctx, mb.ID, anthropic.MessageBatchCancelParams{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(cancelled.ProcessingStatus)).To(Equal("canceling"))
		g.Expect(cancelled.CancelInitiatedAt.IsZero()).To(BeFalse())
		g.Expect(batchOf(g, acct.Namespace, mb.ID).Annotations).To(HaveKey(batches.CancelAnnotation))

		_, err = c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
			Requests: []anthropic.MessageBatchNewParamsRequest{req("same"), req("same")}})
		var apiErr *anthropic.Error
		g.Expect(err).To(BeAssignableToTypeOf(apiErr))
		g.Expect(err.(*anthropic.Error).StatusCode).To(Equal(400), "duplicate custom_id")
	})
})
