package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func TestBatchProtocol(t *testing.T) {
	p := New(nil)
	for _, tc := range []struct {
		name    string
		options map[string]string
		client  upstream.Protocol
		want    upstream.Protocol
		ok      bool
	}{
		{"chat stays chat", nil, upstream.ChatCompletions, upstream.ChatCompletions, true},
		{"responses stays responses", nil, upstream.Responses, upstream.Responses, true},
		{"messages goes to chat", nil, upstream.Messages, upstream.ChatCompletions, true},
		{"a chat-only backend takes responses as chat", map[string]string{"protocols": "chat_completions"}, upstream.Responses, upstream.ChatCompletions, true},
		{"batch gateway runs the lines in the gateway", map[string]string{"batch": "gateway"}, upstream.ChatCompletions, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			up, ok := p.BatchProtocol(upstream.Backend{Options: tc.options}, tc.client)
			g.Expect(ok).To(Equal(tc.ok))
			if ok {
				g.Expect(up).To(Equal(tc.want))
			}
		})
	}
}

func batchBackend(f *fakeupstream.Server) upstream.Backend {
	return upstream.Backend{Name: "oai", Provider: Name, BaseURL: f.URL + "/v1", APIKey: f.Key(), UpstreamModel: "gpt-4o-mini",
		Options: map[string]string{"organization": "org-1", "project": "proj-1"}}
}

// chatLines are n batch lines of a messages client, as the Batch controller
// builds them (custom IDs line-0 …).
func chatLines(t *testing.T, n int) []upstream.BatchLine {
	lines := make([]upstream.BatchLine, n)
	for i := range lines {
		body, err := upstream.BatchBody(upstream.Messages, upstream.ChatCompletions, clientLine(i), "gpt-4o-mini")
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = upstream.BatchLine{CustomID: fmt.Sprintf("line-%d", i), Body: body}
	}
	return lines
}

// clientLine is the messages body of chatLines' line i.
func clientLine(i int) []byte {
	return fmt.Appendf(nil, `{"model":"claude-client","max_tokens":64,"messages":[{"role":"user","content":"question %d"}]}`, i)
}

// waitEnded polls the job until it is no longer running.
func waitEnded(g Gomega, p *Provider, b upstream.Backend, id string) upstream.BatchJob {
	var job upstream.BatchJob
	g.Eventually(func() (upstream.BatchJobState, error) {
		var err error
		job, err = p.BatchStatus(context.Background(), b, id)
		return job.State, err
	}, 10*time.Second, 20*time.Millisecond).ShouldNot(Equal(upstream.BatchJobRunning))
	return job
}

func results(g Gomega, p *Provider, b upstream.Backend, id string) map[string]upstream.BatchAnswer {
	got := map[string]upstream.BatchAnswer{}
	g.Expect(p.BatchResults(context.Background(), b, id, func(a upstream.BatchAnswer) error {
		g.Expect(got).NotTo(HaveKey(a.CustomID), "each line once")
		got[a.CustomID] = a
		return nil
	})).To(Succeed())
	return got
}

func TestBatchRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	f.Handle(func(r fakeupstream.Request) fakeupstream.Reply {
		if r.Header.Get(fakeupstream.BatchCustomIDHeader) == "line-1" {
			return fakeupstream.Reply{Status: 400, ErrorMessage: "Invalid 'max_tokens': integer above maximum value."}
		}
		return fakeupstream.Reply{Text: "an answer of four", Usage: fakeupstream.Usage{InputTokens: 7, OutputTokens: 4}}
	})
	p := New(fakeupstream.Client())
	b := batchBackend(f)

	id, err := p.SubmitBatch(ctx, b, upstream.ChatCompletions, chatLines(t, 3))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.BatchesCreated()).To(Equal(1))

	reqs := f.Requests()
	upload, create := reqs[0], reqs[1]
	g.Expect(upload.Rejected).To(BeFalse(), string(upload.Body))
	g.Expect(upload.Path).To(Equal("/v1/files"))
	for _, r := range []fakeupstream.Request{upload, create} {
		g.Expect(r.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
		g.Expect(r.Header.Get("OpenAI-Organization")).To(Equal("org-1"))
		g.Expect(r.Header.Get("OpenAI-Project")).To(Equal("proj-1"))
	}
	purpose, file := multipartForm(g, upload)
	g.Expect(purpose).To(Equal("batch"))
	first := bytes.SplitN(file, []byte("\n"), 2)[0]
	g.Expect(json.Unmarshal(first, new(map[string]any))).To(Succeed())
	var line struct {
		CustomID string         `json:"custom_id"`
		Method   string         `json:"method"`
		URL      string         `json:"url"`
		Body     map[string]any `json:"body"`
	}
	g.Expect(json.Unmarshal(first, &line)).To(Succeed())
	g.Expect(line.CustomID).To(Equal("line-0"))
	g.Expect(line.Method).To(Equal("POST"))
	g.Expect(line.URL).To(Equal("/v1/chat/completions"))
	g.Expect(line.Body).To(HaveKeyWithValue("model", "gpt-4o-mini"))
	g.Expect(create.Rejected).To(BeFalse(), string(create.Body))
	g.Expect(create.JSON()).To(And(HaveKeyWithValue("endpoint", "/v1/chat/completions"), HaveKeyWithValue("completion_window", "24h"),
		HaveKeyWithValue("metadata", HaveKeyWithValue("created_by", "modelgate"))))

	g.Expect(waitEnded(g, p, b, id).State).To(Equal(upstream.BatchJobEnded))
	got := results(g, p, b, id)
	g.Expect(got).To(HaveLen(3))
	for i, cid := range map[int]string{0: "line-0", 2: "line-2"} {
		a := got[cid]
		g.Expect(a.Status).To(Equal(200), string(a.Body))
		res, err := upstream.BatchAnswerResult(upstream.Messages, upstream.ChatCompletions, clientLine(i), a.Body, "claude-client")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.UsageReported).To(BeTrue())
		g.Expect(res.Usage.InputTokens).To(Equal(int64(7)))
		g.Expect(res.Usage.OutputTokens).To(Equal(int64(4)))
		g.Expect(string(res.Body)).To(ContainSubstring("an answer of four"))
		g.Expect(f.BatchLineRuns(cid)).To(Equal(1))
	}
	g.Expect(got["line-1"].Status).To(Equal(400))
	g.Expect(upstream.ErrorMessage(got["line-1"].Body)).To(Equal("Invalid 'max_tokens': integer above maximum value."))
}

func multipartForm(g Gomega, r fakeupstream.Request) (purpose string, file []byte) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	g.Expect(err).NotTo(HaveOccurred())
	mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return purpose, file
		}
		g.Expect(err).NotTo(HaveOccurred())
		data, _ := io.ReadAll(part)
		switch part.FormName() {
		case "purpose":
			purpose = string(data)
		case "file":
			g.Expect(part.FileName()).To(HaveSuffix(".jsonl"))
			file = data
		}
	}
}

func TestBatchResponses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	p := New(fakeupstream.Client())
	b := batchBackend(f)
	body, err := upstream.BatchBody(upstream.Responses, upstream.Responses, []byte(`{"model":"client","input":"hi"}`), "gpt-4o-mini")
	g.Expect(err).NotTo(HaveOccurred())

	id, err := p.SubmitBatch(ctx, b, upstream.Responses, []upstream.BatchLine{{CustomID: "r-1", Body: body}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitEnded(g, p, b, id).State).To(Equal(upstream.BatchJobEnded))
	got := results(g, p, b, id)
	g.Expect(got["r-1"].Status).To(Equal(200))
	res, err := upstream.BatchAnswerResult(upstream.Responses, upstream.Responses, []byte(`{"model":"client","input":"hi"}`), got["r-1"].Body, "client")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.UsageReported).To(BeTrue())
	g.Expect(res.Usage.InputTokens).To(Equal(int64(10)))
}

func TestBatchCancel(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	f.SetBatchLineDelay(100 * time.Millisecond)
	p := New(fakeupstream.Client())
	b := batchBackend(f)

	id, err := p.SubmitBatch(ctx, b, upstream.ChatCompletions, chatLines(t, 20))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return f.BatchLineRuns("line-0") }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed())
	g.Expect(waitEnded(g, p, b, id).State).To(Equal(upstream.BatchJobEnded))
	g.Expect(f.BatchStatus(id)).To(Equal("cancelled"))
	g.Expect(p.CancelBatch(ctx, b, id)).To(Succeed(), "cancelling an ended job is not an error")

	got := results(g, p, b, id)
	g.Expect(got).To(HaveLen(20))
	ran, notRun := 0, 0
	for cid, a := range got {
		switch {
		case a.Status == 200:
			ran++
			g.Expect(f.BatchLineRuns(cid)).To(Equal(1))
		case a.NotRun == upstream.NotRunCancelled:
			notRun++
			g.Expect(a.Status).To(BeZero())
			g.Expect(f.BatchLineRuns(cid)).To(BeZero())
		default:
			t.Fatalf("line %s: unexpected answer %+v", cid, a)
		}
	}
	g.Expect(ran).To(BeNumerically(">=", 1))
	g.Expect(notRun).To(BeNumerically(">=", 1))
}

func TestBatchNoBatchAPI(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewOpenAIWithoutBatch()
	defer f.Close()
	p := New(fakeupstream.Client())

	_, err := p.SubmitBatch(context.Background(), batchBackend(f), upstream.ChatCompletions, chatLines(t, 1))
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeTrue(), "%v", err)
	g.Expect(f.Last().Path).To(Equal("/v1/files"))
}

func TestBatchSubmitRefused(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	p := New(fakeupstream.Client())
	b := batchBackend(f)
	b.APIKey = "sk-wrong"

	_, err := p.SubmitBatch(context.Background(), b, upstream.ChatCompletions, chatLines(t, 1))
	g.Expect(errors.Is(err, upstream.ErrNoBatchAPI)).To(BeFalse())
	ue, ok := upstream.As(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(ue.Status).To(Equal(401))
	g.Expect(ue.Message).To(ContainSubstring("Incorrect API key provided."))
	g.Expect(err.Error()).NotTo(ContainSubstring("sk-wrong"))
}

func TestBatchFailedJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAI()
	defer f.Close()
	p := New(fakeupstream.Client())
	b := batchBackend(f)
	lines := chatLines(t, 2)
	other, err := upstream.BatchBody(upstream.ChatCompletions, upstream.ChatCompletions, []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`), "gpt-4o")
	g.Expect(err).NotTo(HaveOccurred())
	lines[1].Body = other

	id, err := p.SubmitBatch(ctx, b, upstream.ChatCompletions, lines)
	g.Expect(err).NotTo(HaveOccurred(), "the file is checked after the job was made")
	job := waitEnded(g, p, b, id)
	g.Expect(job.State).To(Equal(upstream.BatchJobFailed))
	g.Expect(job.Message).To(And(HavePrefix("line 2: "), ContainSubstring("model")))
	g.Expect(f.BatchLineRuns("line-0")).To(BeZero())
}

func TestBatchAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       upstream.BatchAnswer
		err        bool
	}{
		{"answer", `{"id":"batch_req_1","custom_id":"a","response":{"status_code":200,"request_id":"req_1","body":{"id":"chatcmpl-1"}},"error":null}`,
			upstream.BatchAnswer{CustomID: "a", Status: 200, Body: []byte(`{"id":"chatcmpl-1"}`)}, false},
		{"expired", `{"id":"batch_req_2","custom_id":"b","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`,
			upstream.BatchAnswer{CustomID: "b", NotRun: upstream.NotRunExpired}, false},
		{"cancelled", `{"id":"batch_req_3","custom_id":"c","response":null,"error":{"code":"batch_cancelled","message":"This request was not executed because the batch was cancelled."}}`,
			upstream.BatchAnswer{CustomID: "c", NotRun: upstream.NotRunCancelled}, false},
		{"other error", `{"id":"batch_req_4","custom_id":"d","response":null,"error":{"code":"server_error","message":"boom"}}`,
			upstream.BatchAnswer{CustomID: "d", Status: 500, Body: []byte(`{"error":{"code":"server_error","message":"boom","param":null,"type":"server_error"}}`)}, false},
		{"malformed", `{"custom_id":"e",`, upstream.BatchAnswer{}, true},
		{"no custom id", `{"response":{"status_code":200,"body":{}}}`, upstream.BatchAnswer{}, true},
		{"neither", `{"custom_id":"f","response":null,"error":null}`, upstream.BatchAnswer{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a, err := batchAnswer([]byte(tc.line))
			if tc.err {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(tc.want))
		})
	}
}
