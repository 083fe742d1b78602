package vertex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The waits of a job on the fake: it runs in the background.
const (
	jobTimeout = 10 * time.Second
	jobPoll    = 20 * time.Millisecond
)

const batchBucket = "mg-batches"

// batchSetup is the provider and a Gemini backend that batches on the fake.
func batchSetup(t *testing.T) (*fakeupstream.Server, *Provider, upstream.Backend) {
	t.Helper()
	fake, p, gem, _ := setup(t)
	gem.Options = map[string]string{OptionRegion: "us-east5", OptionBatchGCSURI: "gs://" + batchBucket + "/runs/", OptionStorageURL: fake.URL}
	return fake, p, gem
}

// chatLine is a batch line of a chat request saying text.
func chatLine(t *testing.T, id, text string) (upstream.BatchLine, []byte) {
	t.Helper()
	client := fmt.Appendf(nil, `{"model":"client-model","messages":[{"role":"user","content":%q}],"max_tokens":50}`, text)
	body, err := upstream.BatchBody(upstream.ChatCompletions, upstream.Gemini, client, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	return upstream.BatchLine{CustomID: id, Body: body}, client
}

// results reads a job's answers by custom ID.
func results(g *WithT, p *Provider, b upstream.Backend, id string) map[string]upstream.BatchAnswer {
	out := map[string]upstream.BatchAnswer{}
	g.Expect(p.BatchResults(context.Background(), b, id, func(a upstream.BatchAnswer) error {
		g.Expect(out).NotTo(HaveKey(a.CustomID), "each line once")
		out[a.CustomID] = a
		return nil
	})).To(Succeed())
	return out
}

func waitEnded(g *WithT, p *Provider, b upstream.Backend, id string) {
	g.Eventually(func() (upstream.BatchJob, error) {
		return p.BatchStatus(context.Background(), b, id)
	}).WithTimeout(jobTimeout).WithPolling(jobPoll).Should(Equal(upstream.BatchJob{State: upstream.BatchJobEnded}))
}

func TestBatchProtocol(t *testing.T) {
	g := NewWithT(t)
	_, p, gem := batchSetup(t)
	up, ok := p.BatchProtocol(gem, upstream.ChatCompletions)
	g.Expect(ok).To(BeTrue())
	g.Expect(up).To(Equal(upstream.Gemini))

	with := func(b upstream.Backend, k, v string) upstream.Backend {
		o := map[string]string{}
		for key, val := range b.Options {
			o[key] = val
		}
		o[k] = v
		b.Options = o
		return b
	}
	for name, b := range map[string]upstream.Backend{
		"no location":         with(gem, OptionBatchGCSURI, ""),
		"not a gs:// URI":     with(gem, OptionBatchGCSURI, "s3://bucket/x"),
		"kept in the gateway": with(gem, OptionBatch, BatchGateway),
		"claude":              func() upstream.Backend { b := gem; b.UpstreamModel = "claude-sonnet-4@20250514"; return b }(),
		"anthropic publisher": with(gem, OptionPublisher, PublisherAnthropic),
	} {
		_, ok := p.BatchProtocol(b, upstream.Messages)
		g.Expect(ok).To(BeFalse(), name)
	}
}

// TestBatch: the lines go to Cloud Storage as one JSONL object, a job
// reads it, and the predictions come back by custom ID with their usage,
// a failed line as its error.
func TestBatch(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem := batchSetup(t)
	fake.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
		switch {
		case bytes.Contains(r.Body, []byte("refuse me")):
			return fakeupstream.Reply{Status: http.StatusBadRequest, ErrorMessage: "Please use a valid role: user, model."}
		case bytes.Contains(r.Body, []byte("second")):
			return fakeupstream.Reply{Text: "two words", Usage: fakeupstream.Usage{InputTokens: 21, OutputTokens: 5, ReasoningTokens: 2}}
		}
		return fakeupstream.Reply{Text: "one", Usage: fakeupstream.Usage{InputTokens: 11, OutputTokens: 3}}
	})
	l1, c1 := chatLine(t, "batch_req_000000000000000000000001", "first")
	l2, c2 := chatLine(t, "batch_req_000000000000000000000002", "second")
	l3, _ := chatLine(t, "batch_req_000000000000000000000003", "refuse me")

	id, err := p.SubmitBatch(context.Background(), gem, upstream.Gemini, []upstream.BatchLine{l1, l2, l3})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(MatchRegexp(`^projects/` + fakeupstream.VertexProject + `/locations/us-east5/batchPredictionJobs/[0-9]+$`))
	g.Expect(fake.PredictionJobsCreated()).To(Equal(1))

	// The input: one object under the prefix, a line per request with the
	// custom ID in its labels.
	names := fake.GCSObjectNames(batchBucket)
	g.Expect(names).To(ContainElement(MatchRegexp(`^runs/modelgate-[0-9a-f]{24}/input\.jsonl$`)))
	in, _ := fake.GCSObject(batchBucket, names[0])
	inLines := strings.Split(strings.TrimSpace(string(in)), "\n")
	g.Expect(inLines).To(HaveLen(3))
	var first struct {
		Request map[string]json.RawMessage `json:"request"`
	}
	g.Expect(json.Unmarshal([]byte(inLines[0]), &first)).To(Succeed())
	g.Expect(first.Request).To(HaveKey("contents"))
	g.Expect(first.Request).NotTo(HaveKey("model"))
	g.Expect(string(first.Request["labels"])).To(Equal(`{"` + LineLabel + `":"batch_req_000000000000000000000001"}`))
	for _, r := range fake.Requests() {
		if r.Path != "" && !strings.Contains(r.Path, ":generateContent") {
			g.Expect(r.Header.Get("Authorization")).To(HavePrefix("Bearer ya29.fake-"), r.Path)
		}
	}

	waitEnded(g, p, gem, id)
	g.Expect(fake.PredictionLinesRun()).To(Equal(3))
	g.Expect(fake.GCSObjectNames(batchBucket)).To(ConsistOf(names[0],
		MatchRegexp(`^runs/modelgate-[0-9a-f]{24}/prediction-model-[0-9T:.-]+Z/predictions\.jsonl$`)), "the predictions beside the input")
	got := results(g, p, gem, id)
	g.Expect(got).To(HaveLen(3))

	a1 := got[l1.CustomID]
	g.Expect(a1.Status).To(Equal(http.StatusOK))
	res, err := upstream.BatchAnswerResult(upstream.ChatCompletions, upstream.Gemini, c1, a1.Body, "client-model")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.UsageReported).To(BeTrue())
	g.Expect(res.Usage.InputTokens).To(Equal(int64(11)))
	g.Expect(res.Usage.OutputTokens).To(Equal(int64(3)))
	g.Expect(string(res.Body)).To(ContainSubstring(`"content":"one"`))

	res, err = upstream.BatchAnswerResult(upstream.ChatCompletions, upstream.Gemini, c2, got[l2.CustomID].Body, "client-model")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Usage.InputTokens).To(Equal(int64(21)))
	g.Expect(res.Usage.OutputTokens).To(Equal(int64(5)), "thoughts bill as output")
	g.Expect(res.Usage.ReasoningTokens).To(Equal(int64(2)))
	g.Expect(string(res.Body)).To(ContainSubstring(`"content":"two words"`))

	a3 := got[l3.CustomID]
	g.Expect(a3.Status).To(Equal(http.StatusBadRequest))
	g.Expect(a3.NotRun).To(BeEmpty())
	g.Expect(upstream.ErrorMessage(a3.Body)).To(Equal("Please use a valid role: user, model."))

	g.Expect(p.CancelBatch(context.Background(), gem, id)).To(Succeed(), "cancelling an ended job is not an error")
}

// TestBatchCancel: a job cancelled midway runs no further line; the lines
// it ran have their answers, the others are NotRun "cancelled".
func TestBatchCancel(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem := batchSetup(t)
	fake.SetPredictionLineDelay(100 * time.Millisecond)
	var lines []upstream.BatchLine
	for i := range 8 {
		l, _ := chatLine(t, fmt.Sprintf("batch_req_%024d", i), fmt.Sprintf("line %d", i))
		lines = append(lines, l)
	}
	id, err := p.SubmitBatch(context.Background(), gem, upstream.Gemini, lines)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(fake.PredictionLinesRun).WithTimeout(jobTimeout).WithPolling(jobPoll).Should(BeNumerically(">=", 2))
	g.Expect(p.CancelBatch(context.Background(), gem, id)).To(Succeed())
	waitEnded(g, p, gem, id)
	ran := fake.PredictionLinesRun()
	g.Expect(ran).To(BeNumerically("<", len(lines)))
	g.Consistently(fake.PredictionLinesRun).WithTimeout(300 * time.Millisecond).Should(Equal(ran))

	got := results(g, p, gem, id)
	g.Expect(got).To(HaveLen(len(lines)), "every line once: answered or not run")
	answered := 0
	for _, l := range lines {
		switch a := got[l.CustomID]; a.Status {
		case http.StatusOK:
			answered++
		default:
			g.Expect(a).To(Equal(upstream.BatchAnswer{CustomID: l.CustomID, NotRun: upstream.NotRunCancelled}))
		}
	}
	g.Expect(answered).To(Equal(ran))
}

// TestBatchFailedJob: a job whose input cannot be read fails as a whole,
// with Vertex AI's message.
func TestBatchFailedJob(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem := batchSetup(t)
	l, _ := chatLine(t, "batch_req_000000000000000000000001", "hi")
	id, err := p.SubmitBatch(context.Background(), gem, upstream.Gemini, []upstream.BatchLine{l})
	g.Expect(err).NotTo(HaveOccurred())
	waitEnded(g, p, gem, id)

	// A job created on an object that does not exist.
	acct, _, err := p.account(gem)
	g.Expect(err).NotTo(HaveOccurred())
	loc, err := locationURL(gem, fakeupstream.VertexProject, "us-east5")
	g.Expect(err).NotTo(HaveOccurred())
	x, err := p.exchange(context.Background(), gem, acct, http.MethodPost, loc+"/batchPredictionJobs", "application/json",
		[]byte(`{"displayName":"x","model":"publishers/google/models/gemini-2.5-flash",
		"inputConfig":{"instancesFormat":"jsonl","gcsSource":{"uris":["gs://mg-batches/none.jsonl"]}},
		"outputConfig":{"predictionsFormat":"jsonl","gcsDestination":{"outputUriPrefix":"gs://mg-batches/out"}}}`), true)
	g.Expect(err).NotTo(HaveOccurred())
	var job struct{ Name string }
	g.Expect(json.Unmarshal(x, &job)).To(Succeed())
	g.Eventually(func() (upstream.BatchJob, error) {
		return p.BatchStatus(context.Background(), gem, job.Name)
	}).WithTimeout(jobTimeout).WithPolling(jobPoll).Should(Equal(upstream.BatchJob{State: upstream.BatchJobFailed,
		Message: "Failed to read input file gs://mg-batches/none.jsonl: No such object."}))
	g.Expect(fake.PredictionLinesRun()).To(Equal(1), "only the first job's line ran")
}

func TestBatchRefusals(t *testing.T) {
	g := NewWithT(t)
	fake, p, gem := batchSetup(t)
	l, _ := chatLine(t, "batch_req_000000000000000000000001", "hi")

	t.Run("no batch API", func(t *testing.T) {
		g := NewWithT(t)
		none := httptest.NewServer(http.NotFoundHandler())
		defer none.Close()
		b := gem
		b.BaseURL = none.URL
		_, err := p.SubmitBatch(context.Background(), b, upstream.Gemini, []upstream.BatchLine{l})
		g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeTrue(), "%v", err)
	})

	t.Run("a custom ID that is no label value", func(t *testing.T) {
		g := NewWithT(t)
		bad := l
		bad.CustomID = "Request 1"
		_, err := p.SubmitBatch(context.Background(), gem, upstream.Gemini, []upstream.BatchLine{bad})
		g.Expect(err).To(MatchError(ContainSubstring("cannot be a Vertex AI label value")))
	})

	t.Run("a job name that is not one", func(t *testing.T) {
		g := NewWithT(t)
		_, err := p.BatchStatus(context.Background(), gem, "projects/p/locations/us-east5/batchPredictionJobs/1/../../x")
		g.Expect(err).To(MatchError(ContainSubstring("not a batch prediction job name")))
	})

	t.Run("a revoked token is dropped", func(t *testing.T) {
		g := NewWithT(t)
		id, err := p.SubmitBatch(context.Background(), gem, upstream.Gemini, []upstream.BatchLine{l})
		g.Expect(err).NotTo(HaveOccurred())
		before := fake.TokenExchanges()
		fake.RevokeTokens()
		_, err = p.BatchStatus(context.Background(), gem, id)
		ue, ok := upstream.As(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(ue.Status).To(Equal(http.StatusUnauthorized))
		g.Expect(err.Error()).NotTo(ContainSubstring("PRIVATE KEY"))
		_, err = p.BatchStatus(context.Background(), gem, id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fake.TokenExchanges()).To(Equal(before + 1))
	})
	_ = g
}
