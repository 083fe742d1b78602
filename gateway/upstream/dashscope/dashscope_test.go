package dashscope_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/dashscope"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func call(f *fakeupstream.DashScope, model, request string) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "ds", Provider: dashscope.Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: model},
		Kind:    upstream.Image, TaskID: "task_1", Request: json.RawMessage(request), Outputs: 1,
	}
}

func classOf(t *testing.T, err error) *upstream.Error {
	t.Helper()
	ue, ok := upstream.As(err)
	if !ok {
		t.Fatalf("not an upstream error: %v", err)
	}
	return ue
}

// The validated single-image request, as gateway/media stores it.
const editRequest = `{"model":"brand-c-image-3.0","prompt":"put the clock by the vase","size":"1280x720","n":1,
	"image_urls":["https://img.example/a.png","https://img.example/b.png"],
	"metadata":{"prompt_extend":false,"prompt_extend_mode":"direct","negative_prompt":"blur","seed":42,"watermark":false}}`

func TestSubmitPollEdit(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	f.SetPlan(fakeupstream.DashScopePlan{Polls: 2, RateLimited: 1, RetryAfter: "7"})
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	ctx := context.Background()
	c := call(f, "wan2.5-i2i-preview", editRequest)

	s, err := a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).NotTo(BeEmpty())
	g.Expect(s.Final).To(BeNil())
	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal(dashscope.PathImageToImage))
	g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
	g.Expect(sent.Header.Get("X-DashScope-Async")).To(Equal("enable"))
	g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "wan2.5-i2i-preview",
		"input": map[string]any{"prompt": "put the clock by the vase", "negative_prompt": "blur",
			"images": []any{"https://img.example/a.png", "https://img.example/b.png"}},
		"parameters": map[string]any{"size": "1280*720", "n": float64(1), "prompt_extend": false, "watermark": false, "seed": float64(42)}}))

	_, err = a.Poll(ctx, c, s.ID)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Transient))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.Status).To(Equal(http.StatusTooManyRequests))
	g.Expect(ue.RetryAfter).To(Equal(7 * time.Second))

	st, err := a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running}))
	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running, Progress: 50}))

	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.Outputs).To(HaveLen(1))
	g.Expect(st.Outputs[0].URL).To(HavePrefix(f.URL + "/oss/" + s.ID + "/0.png"))
	resp, err := fakeupstream.Client().Get(st.Outputs[0].URL) // the controller downloads it without the credential
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("image/png"))
}

func TestTextToImageEndpoint(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	c := call(f, "wan2.5-t2i-preview", `{"model":"m","prompt":"a lighthouse","size":"1024x1024","n":1,"metadata":{"prompt_extend":true}}`)
	_, err := dashscope.Adapter{Client: fakeupstream.Client()}.Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal(dashscope.PathTextToImage))
	g.Expect(sent.JSON()["input"]).To(Equal(map[string]any{"prompt": "a lighthouse"}))
}

func TestPolicyFailure(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	f.SetPlan(fakeupstream.DashScopePlan{FailCode: "DataInspectionFailed", FailMessage: "Output data may contain inappropriate content."})
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	c := call(f, "wan2.5-i2i-preview", editRequest)
	s, err := a.Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := a.Poll(context.Background(), c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Failed, ErrorCode: upstream.CodePolicy,
		ErrorMessage: "Output data may contain inappropriate content."}))

	f.SetPlan(fakeupstream.DashScopePlan{FailCode: "InternalError.Algo", FailMessage: "algorithm error"})
	s, err = a.Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	st, err = a.Poll(context.Background(), c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Failed, ErrorCode: "InternalError.Algo", ErrorMessage: "algorithm error"}))

	st, err = a.Poll(context.Background(), c, "no-such-task")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Failed))
}

func TestSubmitErrorsAreClassified(t *testing.T) {
	f := fakeupstream.NewDashScope()
	defer f.Close()
	cases := []struct {
		fail      fakeupstream.DashScopeFailure
		class     upstream.Class
		code      string
		retryable bool
		after     time.Duration
	}{
		{fakeupstream.DashScopeFailure{Status: 400, Code: "DataInspectionFailed", Message: "Input data may contain inappropriate content."}, upstream.Permanent, upstream.CodePolicy, false, 0},
		{fakeupstream.DashScopeFailure{Status: 429, Code: "Throttling", Message: "Requests throttling triggered.", RetryAfter: "3"}, upstream.Failover, "Throttling", true, 3 * time.Second},
		{fakeupstream.DashScopeFailure{Status: 400, Code: "InvalidParameter", Message: "bad size"}, upstream.Permanent, "InvalidParameter", false, 0},
		{fakeupstream.DashScopeFailure{Status: 500, Code: "InternalError", Message: "oops"}, upstream.Failover, "InternalError", true, 0},
		{fakeupstream.DashScopeFailure{Status: 401, Code: "InvalidApiKey", Message: "Invalid API-key provided."}, upstream.Failover, "InvalidApiKey", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.fail.Code, func(t *testing.T) {
			g := NewWithT(t)
			f.Fail(tc.fail)
			_, err := dashscope.Adapter{Client: fakeupstream.Client()}.Submit(context.Background(), call(f, "wan2.5-i2i-preview", editRequest))
			ue := classOf(t, err)
			g.Expect(ue.Class).To(Equal(tc.class))
			g.Expect(ue.Code).To(Equal(tc.code))
			g.Expect(ue.Retryable).To(Equal(tc.retryable))
			g.Expect(ue.RetryAfter).To(Equal(tc.after))
			g.Expect(ue.Message).To(ContainSubstring(tc.fail.Message))
		})
	}
}

func TestFakeValidates(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	// An edit model without reference images goes to text2image, which the
	// fake (like DashScope) refuses for it.
	_, err := a.Submit(context.Background(), call(f, "wan2.5-i2i-preview", `{"prompt":"p","n":1}`))
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal("InvalidParameter"))
	// More than three references never leave the gateway.
	_, err = a.Submit(context.Background(), call(f, "wan2.5-i2i-preview",
		`{"prompt":"p","image_urls":["https://a/1","https://a/2","https://a/3","https://a/4"]}`))
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	g.Expect(f.Count(http.MethodPost, "/api/v1/services/aigc/image2image")).To(Equal(0))
	// A missing base URL fails over.
	c := call(f, "wan2.5-i2i-preview", editRequest)
	c.Backend.BaseURL = ""
	_, err = a.Submit(context.Background(), c)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	g.Expect(strings.Contains(err.Error(), "baseURL")).To(BeTrue())
}

func TestCancel(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	f.SetPlan(fakeupstream.DashScopePlan{Polls: 3})
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	c := call(f, "wan2.5-i2i-preview", editRequest)
	s, err := a.Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Cancel(context.Background(), c, s.ID)).To(Succeed())
	g.Expect(f.Status(s.ID)).To(Equal("CANCELED"))
	st, err := a.Poll(context.Background(), c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Failed))
}
