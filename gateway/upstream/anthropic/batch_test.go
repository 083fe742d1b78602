package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/anthropic"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func batchLines(ids ...string) []upstream.BatchLine {
	lines := make([]upstream.BatchLine, len(ids))
	for i, id := range ids {
		lines[i] = upstream.BatchLine{CustomID: id,
			Body: fmt.Appendf(nil, `{"model":"claude-up","max_tokens":64,"messages":[{"role":"user","content":"line %d"}]}`, i)}
	}
	return lines
}

func batchBackend(f *fakeupstream.Server) upstream.Backend {
	return upstream.Backend{Name: "a", Provider: anthropic.Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "claude-up",
		Options: map[string]string{"anthropic-beta": "backend-beta"}}
}

// waitEnded polls the job until it has ended.
func waitEnded(g *WithT, p *anthropic.Provider, b upstream.Backend, id string) {
	g.Eventually(func() (upstream.BatchJobState, error) {
		job, err := p.BatchStatus(context.Background(), b, id)
		return job.State, err
	}, 10*time.Second, 20*time.Millisecond).Should(Equal(upstream.BatchJobEnded))
}

func results(g *WithT, p *anthropic.Provider, b upstream.Backend, id string) map[string]upstream.BatchAnswer {
	out := map[string]upstream.BatchAnswer{}
	g.Expect(p.BatchResults(context.Background(), b, id, func(a upstream.BatchAnswer) error {
		g.Expect(out).NotTo(HaveKey(a.CustomID), "each line once")
		out[a.CustomID] = a
		return nil
	})).To(Succeed())
	return out
}

func TestBatchProtocol(t *testing.T) {
	g := NewWithT(t)
	p := anthropic.New(nil)
	for _, c := range []upstream.Protocol{upstream.Messages, upstream.ChatCompletions, upstream.Responses} {
		up, ok := p.BatchProtocol(upstream.Backend{}, c)
		g.Expect(ok).To(BeTrue())
		g.Expect(up).To(Equal(upstream.Messages))
	}
	_, ok := p.BatchProtocol(upstream.Backend{Options: map[string]string{"batch": "gateway"}}, upstream.Messages)
	g.Expect(ok).To(BeFalse())
}

func TestBatchRunsToTheEnd(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	f.SetDefault(fakeupstream.Reply{Text: "batched answer here", Usage: fakeupstream.Usage{InputTokens: 12, OutputTokens: 3}})
	p := anthropic.New(fakeupstream.Client())
	b := batchBackend(f)
	ids := []string{batches.RequestID("batch_1", 1), batches.RequestID("batch_1", 2), batches.RequestID("batch_1", 3)}
	ctx := context.Background()

	id, err := p.SubmitBatch(ctx, b, upstream.Messages, batchLines(ids...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(HavePrefix("msgbatch_"))
	g.Expect(f.MessageBatchesCreated()).To(Equal(1))
	create := f.Requests()[0]
	g.Expect(create.Method).To(Equal(http.MethodPost))
	g.Expect(create.Path).To(Equal("/v1/messages/batches"))
	g.Expect(create.Rejected).To(BeFalse())
	g.Expect(create.Header.Get("x-api-key")).To(Equal(f.Key()))
	g.Expect(create.Header.Get("anthropic-version")).To(Equal(anthropic.DefaultVersion))
	g.Expect(create.Header.Values("anthropic-beta")).To(Equal([]string{"backend-beta"}))
	var sent struct {
		Requests []struct {
			CustomID string         `json:"custom_id"`
			Params   map[string]any `json:"params"`
		} `json:"requests"`
	}
	g.Expect(json.Unmarshal(create.Body, &sent)).To(Succeed())
	g.Expect(sent.Requests).To(HaveLen(3))
	g.Expect(sent.Requests[1].CustomID).To(Equal(ids[1]), "the gateway's request IDs fit custom_id as they are")
	g.Expect(sent.Requests[1].Params).To(HaveKeyWithValue("model", "claude-up"))

	waitEnded(g, p, b, id)
	got := results(g, p, b, id)
	g.Expect(got).To(HaveLen(3))
	for _, cid := range ids {
		a := got[cid]
		g.Expect(a.Status).To(Equal(200))
		g.Expect(a.NotRun).To(BeEmpty())
		var msg struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Usage map[string]int64 `json:"usage"`
		}
		g.Expect(json.Unmarshal(a.Body, &msg)).To(Succeed())
		g.Expect(msg.Type).To(Equal("message"))
		g.Expect(msg.Content[0].Text).To(Equal("batched answer here"))
		g.Expect(msg.Usage).To(Equal(map[string]int64{"input_tokens": 12, "output_tokens": 3}))
		g.Expect(f.MessageBatchLineRuns(cid)).To(Equal(1))
	}
	last := f.Last()
	g.Expect(last.Path).To(Equal("/v1/messages/batches/"+id+"/results"), "read at the batch's results_url")
	g.Expect(last.Header.Get("x-api-key")).To(Equal(f.Key()))

	// The answer reads as Invoke's would.
	res, err := upstream.BatchAnswerResult(upstream.Messages, upstream.Messages, batchLines(ids[0])[0].Body, got[ids[0]].Body, "client-model")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.UsageReported).To(BeTrue())

	// Cancelling an ended batch is no error.
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed())
}

func TestBatchErroredLine(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	// The second line is refused by the API, the third meets an overload.
	f.Enqueue(fakeupstream.Reply{Text: "ok"},
		fakeupstream.Reply{Status: 400, ErrorMessage: "messages.0.content: too long"},
		fakeupstream.Reply{Status: 529})
	p := anthropic.New(fakeupstream.Client())
	b := batchBackend(f)
	id, err := p.SubmitBatch(context.Background(), b, upstream.Messages, batchLines("l-1", "l-2", "l-3"))
	g.Expect(err).NotTo(HaveOccurred())
	waitEnded(g, p, b, id)
	got := results(g, p, b, id)
	g.Expect(got["l-1"].Status).To(Equal(200))
	g.Expect(got["l-2"].Status).To(Equal(400))
	g.Expect(upstream.ErrorMessage(got["l-2"].Body)).To(Equal("messages.0.content: too long"))
	g.Expect(upstream.ErrorCode(got["l-2"].Body)).To(Equal("invalid_request_error"))
	g.Expect(got["l-3"].Status).To(Equal(529))
	g.Expect(got["l-3"].NotRun).To(BeEmpty())
}

func TestBatchCancelMidway(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	f.SetMessageBatchLineDelay(100 * time.Millisecond)
	p := anthropic.New(fakeupstream.Client())
	b := batchBackend(f)
	ids := []string{"c-1", "c-2", "c-3", "c-4", "c-5", "c-6", "c-7", "c-8"}
	ctx := context.Background()
	id, err := p.SubmitBatch(ctx, b, upstream.Messages, batchLines(ids...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return f.MessageBatchLineRuns("c-2") }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed())
	waitEnded(g, p, b, id)

	got := results(g, p, b, id)
	g.Expect(got).To(HaveLen(len(ids)))
	ran, cancelled := 0, 0
	for _, cid := range ids {
		switch a := got[cid]; {
		case a.Status == 200:
			ran++
			g.Expect(f.MessageBatchLineRuns(cid)).To(Equal(1))
		case a.NotRun == upstream.NotRunCancelled:
			cancelled++
			g.Expect(a.Status).To(BeZero())
			g.Expect(f.MessageBatchLineRuns(cid)).To(BeZero(), "a cancelled line never ran")
		default:
			t.Fatalf("line %s: unexpected answer %+v", cid, a)
		}
	}
	g.Expect(ran).To(BeNumerically(">=", 2))
	g.Expect(cancelled).To(BeNumerically(">=", 1))
	g.Expect(ran + cancelled).To(Equal(len(ids)))
}

func TestBatchExpired(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	f.SetMessageBatchLineDelay(time.Hour)
	p := anthropic.New(fakeupstream.Client())
	b := batchBackend(f)
	id, err := p.SubmitBatch(context.Background(), b, upstream.Messages, batchLines("e-1", "e-2"))
	g.Expect(err).NotTo(HaveOccurred())
	job, err := p.BatchStatus(context.Background(), b, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.State).To(Equal(upstream.BatchJobRunning))
	g.Expect(f.ExpireMessageBatch(id)).To(BeTrue())
	waitEnded(g, p, b, id)
	got := results(g, p, b, id)
	g.Expect(got["e-1"].NotRun).To(Equal(upstream.NotRunExpired))
	g.Expect(got["e-2"].NotRun).To(Equal(upstream.NotRunExpired))
}

func TestBatchNoBatchAPI(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropicWithoutBatches()
	defer f.Close()
	p := anthropic.New(fakeupstream.Client())
	_, err := p.SubmitBatch(context.Background(), batchBackend(f), upstream.Messages, batchLines("n-1"))
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeTrue(), "%v", err)
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(404))
}

func TestBatchSubmitErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewAnthropic()
	defer f.Close()
	p := anthropic.New(fakeupstream.Client())
	b := batchBackend(f)
	ctx := context.Background()

	// An ID outside custom_id's rule is refused before anything is sent.
	_, err := p.SubmitBatch(ctx, b, upstream.Messages, batchLines("has a space"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(f.Count()).To(BeZero())

	// The API's own refusal of the batch (a line without max_tokens).
	lines := batchLines("s-1")
	lines[0].Body = []byte(`{"model":"claude-up","messages":[{"role":"user","content":"hi"}]}`)
	_, err = p.SubmitBatch(ctx, b, upstream.Messages, lines)
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeFalse())
	g.Expect(ue.Status).To(Equal(400))
	g.Expect(ue.Message).To(ContainSubstring("max_tokens: Field required"))
	g.Expect(f.MessageBatchesCreated()).To(BeZero())

	// The backend's credential refused.
	b.APIKey = "wrong"
	_, err = p.SubmitBatch(ctx, b, upstream.Messages, batchLines("s-2"))
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(401))
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong"), "no credential in errors")

	// An unknown batch.
	b.APIKey = f.Key()
	_, err = p.BatchStatus(ctx, b, "msgbatch_unknown")
	ue, _ = upstream.As(err)
	g.Expect(ue.Status).To(Equal(404))
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeFalse(), "only a submission says the API is missing")
}
