package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("Conversations over the Responses API", func() {
	// The second turn names the
	// first by ID and the upstream receives the whole conversation (seen in its
	// input token count), on a native and on a translated upstream.
	It("previous response ID continues the conversation", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		native, translated := uniqueModel("conv"), uniqueModel("conv-via-messages")
		textModel(t, framework.SystemNamespace, native, sim("sim", "simulated-openai"))
		textModel(t, framework.SystemNamespace, translated, sim("sim", "simulated"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		long := strings.Repeat("remember this sentence please ", 40)

		for _, model := range []string{native, translated} {
			first, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(long)}})
			g.Expect(err).NotTo(HaveOccurred())
			alone, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and now?")}})
			g.Expect(err).NotTo(HaveOccurred())
			second, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and now?")}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second.OutputText()).To(Equal("and now?"))
			// The first turn (and its answer) travelled with the second.
			g.Expect(second.Usage.InputTokens).To(BeNumerically(">", alone.Usage.InputTokens+first.Usage.InputTokens/2))

			// Streaming turns are saved too.
			stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(second.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("third")}})
			var streamedID string
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.completed" {
					streamedID = ev.Response.ID
				}
			}
			g.Expect(stream.Err()).NotTo(HaveOccurred())
			fourth, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, PreviousResponseID: openai.String(streamedID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("fourth")}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fourth.Usage.InputTokens).To(BeNumerically(">", second.Usage.InputTokens))
		}

		var oerr *openai.Error
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, PreviousResponseID: openai.String("resp_unknown"),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(400))
		g.Expect(oerr.Message).To(ContainSubstring("resp_unknown"))

		// Another account cannot continue this account's conversation.
		first, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("mine")}})
		g.Expect(err).NotTo(HaveOccurred())
		other := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		oc := openaiClient(other.Key)
		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{
			Model: native, PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
		g.Expect(errors.As(err, &oerr)).To(BeTrue())
		g.Expect(oerr.StatusCode).To(Equal(400))
	})

	// GET and DELETE /v1/responses/{id} serve the key's tenant only; a
	// response past the conversation retention (30 days by default) is gone
	// for GET and for previous_response_id alike, as a deleted one is.
	It("Stored conversations expire", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		ctx := context.Background()
		model := uniqueModel("stored")
		textModel(t, framework.SystemNamespace, model, sim("sim", "simulated-openai"))
		acct := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		c := openaiClient(acct.Key)
		other := openaiClient(newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{}).Key)
		notFound := func(err error, status int, id string) {
			GinkgoHelper()
			var oerr *openai.Error
			g.Expect(errors.As(err, &oerr)).To(BeTrue(), "an OpenAI error, got %v", err)
			g.Expect(oerr.StatusCode).To(Equal(status))
			g.Expect(oerr.Type).To(Equal("invalid_request_error"))
			g.Expect(oerr.Message).To(ContainSubstring(id))
		}
		newTurn := func(prev string) (*responses.Response, error) {
			p := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("keep me")}}
			if prev != "" {
				p.PreviousResponseID = openai.String(prev)
			}
			return c.Responses.New(ctx, p)
		}

		first, err := newTurn("")
		g.Expect(err).NotTo(HaveOccurred())
		got, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.ID).To(Equal(first.ID))
		g.Expect(string(got.Object)).To(Equal("response"))
		g.Expect(string(got.Status)).To(Equal("completed"))
		g.Expect(got.OutputText()).To(Equal(first.OutputText()))
		g.Expect(got.Usage.InputTokens).To(Equal(first.Usage.InputTokens))

		_, err = other.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		notFound(err, 404, first.ID)
		notFound(other.Responses.Delete(ctx, first.ID), 404, first.ID)
		_, err = c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		g.Expect(err).NotTo(HaveOccurred(), "another tenant's DELETE removed nothing")

		// The owner deletes a second response: the public API's deletion object.
		second, err := newTurn(first.ID)
		g.Expect(err).NotTo(HaveOccurred())
		var raw *http.Response
		g.Expect(c.Responses.Delete(ctx, second.ID, option.WithResponseInto(&raw))).To(Succeed())
		body, err := io.ReadAll(raw.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(body).To(MatchJSON(`{"id":"` + second.ID + `","object":"response","deleted":true}`))
		_, err = c.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
		notFound(err, 404, second.ID)
		notFound(c.Responses.Delete(ctx, second.ID), 404, second.ID)
		_, err = newTurn(second.ID)
		notFound(err, 400, second.ID)

		// The manager's retention pass, 31 days on, at the default retention.
		later := clocktesting.NewFakePassiveClock(time.Now().Add(31 * 24 * time.Hour))
		ledger, err := store.Open(ctx, stack.DSN, store.WithClock(later))
		g.Expect(err).NotTo(HaveOccurred())
		defer ledger.Close()
		removed, err := ledger.ApplyRetention(ctx, store.Retention{Responses: housekeeping.DefaultResponsesRetention})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(removed.Rows[store.TableResponses]).To(BeNumerically(">=", 1))
		_, err = c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		notFound(err, 404, first.ID)
		_, err = newTurn(first.ID)
		notFound(err, 400, first.ID)
	})
})
