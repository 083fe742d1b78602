package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// A batch line runs the chat pipeline under its own request ID and is
// charged at the batch price (the default ratio, 0.5); a request sent alone
// on the same pipeline pays the full price.
func TestBatchLineChargesTheBatchPriceUnderItsRequestID(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	lines := NewBatchLines(f.deps, nil)
	res := lines.Serve(context.Background(), "/v1/chat/completions", testPrincipal(), "batch_req_0123", []byte(chatBody))
	g.Expect(res.Status).To(Equal(http.StatusOK), string(res.Body))
	var answer struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	g.Expect(json.Unmarshal(res.Body, &answer)).To(Succeed())
	tokens := answer.Usage.PromptTokens + answer.Usage.CompletionTokens
	g.Expect(f.sink.rows).To(HaveLen(1))
	row := f.sink.rows[0]
	g.Expect(row.RequestID).To(Equal("batch_req_0123"))
	// 2 USD per million tokens is 1 quota per token alone, half in a batch.
	g.Expect(row.Quota).To(Equal(billing.Quota((tokens + 1) / 2)))
	g.Expect(res.Billed).To(BeTrue())
	g.Expect(res.Quota).To(Equal(row.Quota))

	alone := f.post(chatBody)
	g.Expect(alone.Code).To(Equal(http.StatusOK))
	g.Expect(f.sink.rows).To(HaveLen(2))
	g.Expect(f.sink.rows[1].Quota).To(BeNumerically(">", row.Quota), "the batch price is not the live one")
}

func TestBatchLineRefusesStreamsAndUnservedEndpoints(t *testing.T) {
	g := NewWithT(t)
	f := newTextFixture(t)
	lines := NewBatchLines(f.deps, nil)
	res := lines.Serve(context.Background(), "/v1/chat/completions", testPrincipal(), "batch_req_1",
		[]byte(strings.Replace(chatBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	g.Expect(res.Status).To(Equal(http.StatusBadRequest))
	g.Expect(string(res.Body)).To(ContainSubstring("stream is not supported in a batch"))
	g.Expect(string(res.Body)).To(ContainSubstring(`"invalid_request_error"`))

	res = lines.Serve(context.Background(), "/v1/completions", testPrincipal(), "batch_req_2", []byte(chatBody))
	g.Expect(res.Status).To(Equal(http.StatusNotFound))
	g.Expect(res.Billed).To(BeFalse())

	res = lines.Refuse("/v1/messages", http.StatusUnauthorized, "the API key is disabled")
	g.Expect(res.Status).To(Equal(http.StatusUnauthorized))
	g.Expect(string(res.Body)).To(ContainSubstring(`"authentication_error"`))
	g.Expect(f.sink.rows).To(BeEmpty(), "nothing reached the pipeline")
	g.Expect(f.leaser.reserved).To(BeEmpty())
}
