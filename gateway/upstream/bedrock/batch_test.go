package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/bedrock"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

const (
	batchModel = "anthropic.claude-3-5-haiku-20241022-v1:0"
	batchRole  = "arn:aws:iam::123456789012:role/bedrock-batch"
	batchS3URI = "s3://modelgate-batches/jobs"
)

// batchBackend is a Claude backend on the fake with the batch options; the
// fake serves the control plane and S3 at its base URL.
func batchBackend(f *fakeupstream.Server, minRecords int) upstream.Backend {
	b := fakeBackend(f, batchModel)
	b.Options[bedrock.OptionBatchRoleArn] = batchRole
	b.Options[bedrock.OptionBatchS3URI] = batchS3URI
	if minRecords > 0 {
		b.Options[bedrock.OptionBatchMinRecords] = fmt.Sprint(minRecords)
	}
	return b
}

// chatLines are n chat requests as the Batch controller hands them over:
// translated to Messages for the backend's model.
func chatLines(g Gomega, n int, content func(i int) string) ([]upstream.BatchLine, map[string][]byte) {
	lines := make([]upstream.BatchLine, n)
	client := map[string][]byte{}
	for i := range lines {
		body := []byte(fmt.Sprintf(`{"model":"client-model","max_tokens":64,"messages":[{"role":"user","content":%q}]}`, content(i)))
		up, err := upstream.BatchBody(upstream.ChatCompletions, upstream.Messages, body, batchModel)
		g.Expect(err).NotTo(HaveOccurred())
		id := fmt.Sprintf("batch_req_%04d", i)
		lines[i] = upstream.BatchLine{CustomID: id, Body: up}
		client[id] = body
	}
	return lines, client
}

func waitEnded(g Gomega, p *bedrock.Provider, b upstream.Backend, id string) upstream.BatchJob {
	var job upstream.BatchJob
	g.Eventually(func(g Gomega) {
		var err error
		job, err = p.BatchStatus(context.Background(), b, id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(job.State).NotTo(Equal(upstream.BatchJobRunning))
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	return job
}

func results(g Gomega, p *bedrock.Provider, b upstream.Backend, id string) map[string]upstream.BatchAnswer {
	out := map[string]upstream.BatchAnswer{}
	err := p.BatchResults(context.Background(), b, id, func(a upstream.BatchAnswer) error {
		g.Expect(out).NotTo(HaveKey(a.CustomID), "each line once")
		out[a.CustomID] = a
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

func TestBatchProtocol(t *testing.T) {
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	for _, tc := range []struct {
		name  string
		model string
		opts  map[string]string
		ok    bool
	}{
		{"claude with both options", batchModel, nil, true},
		{"claude inference profile", "us.anthropic.claude-sonnet-4-20250514-v1:0", nil, true},
		{"not a claude model", "amazon.nova-pro-v1:0", nil, false},
		{"batches kept in the gateway", batchModel, map[string]string{bedrock.OptionBatch: bedrock.BatchGateway}, false},
		{"no role", batchModel, map[string]string{bedrock.OptionBatchRoleArn: ""}, false},
		{"no S3 location", batchModel, map[string]string{bedrock.OptionBatchS3URI: ""}, false},
		{"not an S3 URI", batchModel, map[string]string{bedrock.OptionBatchS3URI: "https://bucket/prefix"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := batchBackend(f, 0)
			b.UpstreamModel = tc.model
			for k, v := range tc.opts {
				b.Options[k] = v
			}
			up, ok := p.BatchProtocol(b, upstream.ChatCompletions)
			g.Expect(ok).To(Equal(tc.ok))
			if ok {
				g.Expect(up).To(Equal(upstream.Messages))
			}
		})
	}
}

// TestBatchRoundTrip: a job of the minimum record count to its end: the
// input in S3 is InvokeModel's Claude body per record, each record runs
// once, the answers carry the fake's usage and a failed record its status;
// a repeated submission names the same job.
func TestBatchRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := batchBackend(f, 0)
	f.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
		if strings.Contains(string(r.Body), "please fail") {
			return fakeupstream.Reply{Status: http.StatusTooManyRequests, ErrorMessage: "Too many tokens, please wait."}
		}
		return fakeupstream.Reply{Text: "batched answer", Usage: fakeupstream.Usage{InputTokens: 21, OutputTokens: 7}}
	})
	lines, client := chatLines(g, bedrock.DefaultBatchMinRecords, func(i int) string {
		if i == 3 {
			return "please fail"
		}
		return fmt.Sprintf("question %d", i)
	})

	id, err := p.SubmitBatch(ctx, b, upstream.Messages, lines)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(MatchRegexp(`^arn:aws:bedrock:us-east-1:\d{12}:model-invocation-job/[a-z0-9]{12}$`))
	g.Expect(f.InvocationJobsCreated()).To(Equal(1))
	for _, r := range f.Requests() {
		g.Expect(r.Rejected).To(BeFalse(), r.Method+" "+r.Path)
	}

	create := f.Requests()[len(f.Requests())-1]
	g.Expect(create.Method + " " + create.Path).To(Equal("POST /model-invocation-job"))
	g.Expect(create.Header.Get("Authorization")).To(ContainSubstring("/" + fakeupstream.BedrockRegion + "/bedrock/aws4_request"))
	in := create.JSON()["inputDataConfig"].(map[string]any)["s3InputDataConfig"].(map[string]any)["s3Uri"].(string)
	g.Expect(in).To(HavePrefix(batchS3URI + "/"))
	put := f.Requests()[0]
	g.Expect(put.Method).To(Equal(http.MethodPut))
	g.Expect(put.Header.Get("Authorization")).To(ContainSubstring("/" + fakeupstream.BedrockRegion + "/s3/aws4_request"))
	obj, ok := f.S3Object("modelgate-batches", strings.TrimPrefix(in, "s3://modelgate-batches/"))
	g.Expect(ok).To(BeTrue())
	records := strings.Split(strings.TrimSpace(string(obj)), "\n")
	g.Expect(records).To(HaveLen(len(lines)))
	var rec struct {
		RecordID   string         `json:"recordId"`
		ModelInput map[string]any `json:"modelInput"`
	}
	g.Expect(json.Unmarshal([]byte(records[0]), &rec)).To(Succeed())
	g.Expect(rec.RecordID).To(Equal("batch_req_0000"))
	g.Expect(rec.ModelInput).NotTo(HaveKey("model"))
	g.Expect(rec.ModelInput).To(HaveKeyWithValue("anthropic_version", bedrock.AnthropicVersion))
	g.Expect(rec.ModelInput).To(HaveKeyWithValue("max_tokens", BeNumerically("==", 64)))

	again, err := p.SubmitBatch(ctx, b, upstream.Messages, lines)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(id), "the same lines are the same job")
	g.Expect(f.InvocationJobsCreated()).To(Equal(1))

	g.Expect(waitEnded(g, p, b, id)).To(Equal(upstream.BatchJob{State: upstream.BatchJobEnded}))
	answers := results(g, p, b, id)
	g.Expect(answers).To(HaveLen(len(lines)))
	for _, l := range lines {
		a := answers[l.CustomID]
		g.Expect(f.BatchRecordRuns(l.CustomID)).To(Equal(1), l.CustomID)
		if l.CustomID == "batch_req_0003" {
			g.Expect(a.Status).To(Equal(http.StatusTooManyRequests))
			g.Expect(string(a.Body)).To(ContainSubstring("Too many tokens, please wait."))
			g.Expect(string(a.Body)).To(ContainSubstring(`"type":"error"`))
			continue
		}
		g.Expect(a.Status).To(Equal(http.StatusOK), l.CustomID)
		g.Expect(a.NotRun).To(BeEmpty())
		res, err := upstream.BatchAnswerResult(upstream.ChatCompletions, upstream.Messages, client[l.CustomID], a.Body, "client-model")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.UsageReported).To(BeTrue())
		g.Expect(res.Usage.InputTokens).To(Equal(int64(21)))
		g.Expect(res.Usage.OutputTokens).To(Equal(int64(7)))
		g.Expect(string(res.Body)).To(ContainSubstring(`"content":"batched answer"`))
		g.Expect(string(res.Body)).To(ContainSubstring(`"model":"client-model"`))
	}
	g.Expect(f.BatchRecordsRun()).To(Equal(len(lines)))
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed(), "cancelling an ended job is not an error")
}

// TestBatchStop: a job stopped midway ends Stopped: the records that ran
// have their answers, the others are NotRun "cancelled" and never ran.
func TestBatchStop(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	f.SetBatchMinRecords(10)
	f.SetBatchRecordDelay(100 * time.Millisecond)
	p := bedrock.New(fakeupstream.Client())
	b := batchBackend(f, 10)
	lines, _ := chatLines(g, 10, func(i int) string { return fmt.Sprintf("question %d", i) })

	id, err := p.SubmitBatch(ctx, b, upstream.Messages, lines)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(f.BatchRecordsRun).WithTimeout(5 * time.Second).WithPolling(5 * time.Millisecond).Should(BeNumerically(">=", 2))
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed())
	g.Expect(waitEnded(g, p, b, id).State).To(Equal(upstream.BatchJobEnded))
	ran := f.BatchRecordsRun()
	g.Expect(ran).To(BeNumerically("<", len(lines)))

	answers := results(g, p, b, id)
	g.Expect(answers).To(HaveLen(len(lines)))
	done := 0
	for _, l := range lines {
		a := answers[l.CustomID]
		if f.BatchRecordRuns(l.CustomID) == 1 {
			g.Expect(a.Status).To(Equal(http.StatusOK), l.CustomID)
			done++
			continue
		}
		g.Expect(a).To(Equal(upstream.BatchAnswer{CustomID: l.CustomID, NotRun: upstream.NotRunCancelled}))
	}
	g.Expect(done).To(Equal(ran))
	g.Consistently(f.BatchRecordsRun).WithTimeout(300*time.Millisecond).Should(Equal(ran), "no record runs after the stop")
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed(), "cancelling a stopped job is not an error")
}

// TestBatchBelowMinimum: a batch below the job's minimum record count, or
// with tools, is not sent (the gateway runs its lines); a job Bedrock
// refuses for too few records fails with Bedrock's message.
func TestBatchBelowMinimum(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	lines, _ := chatLines(g, 5, func(i int) string { return fmt.Sprintf("question %d", i) })

	_, err := p.SubmitBatch(ctx, batchBackend(f, 0), upstream.Messages, lines)
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeTrue(), fmt.Sprint(err))
	g.Expect(err.Error()).To(ContainSubstring("at least 100 records"))
	g.Expect(f.Count()).To(BeZero(), "nothing was sent")

	// Batch inference does not call tools: a batch with a line that
	// declares them runs through the gateway.
	many, _ := chatLines(g, bedrock.DefaultBatchMinRecords, func(i int) string { return "q" })
	many[7].Body = []byte(`{"model":"` + batchModel + `","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"weather?"}]}`)
	_, err = p.SubmitBatch(ctx, batchBackend(f, 0), upstream.Messages, many)
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeTrue(), fmt.Sprint(err))
	g.Expect(err.Error()).To(ContainSubstring("batch_req_0007 declares tools"))
	g.Expect(f.Count()).To(BeZero(), "nothing was sent")

	// The backend's minimum is below the account's quota: Bedrock fails
	// the job when it validates the input.
	b := batchBackend(f, 2)
	id, err := p.SubmitBatch(ctx, b, upstream.Messages, lines)
	g.Expect(err).NotTo(HaveOccurred())
	job := waitEnded(g, p, b, id)
	g.Expect(job.State).To(Equal(upstream.BatchJobFailed))
	g.Expect(job.Message).To(ContainSubstring("below the minimum (100)"))
	g.Expect(results(g, p, b, id)).To(BeEmpty())
	g.Expect(f.BatchRecordsRun()).To(BeZero())
}

// TestBatchCredential: the control plane and S3 refuse a wrong secret;
// the error names neither the key nor the secret.
func TestBatchCredential(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBedrock()
	defer f.Close()
	p := bedrock.New(fakeupstream.Client())
	b := batchBackend(f, 0)
	b.APIKey = "wrong-secret-0123456789"
	lines, _ := chatLines(g, bedrock.DefaultBatchMinRecords, func(i int) string { return "q" })
	_, err := p.SubmitBatch(context.Background(), b, upstream.Messages, lines)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("SignatureDoesNotMatch"))
	g.Expect(err.Error()).NotTo(ContainSubstring(b.APIKey))
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(http.StatusForbidden))
	g.Expect(ue.Retryable).To(BeFalse())
	g.Expect(f.InvocationJobsCreated()).To(BeZero())

	_, err = p.BatchStatus(context.Background(), b, "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abcdefghijkl")
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("InvalidSignatureException"))
}
