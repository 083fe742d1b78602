package dashscope_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/dashscope"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

// editCall is a call on a backend of the multimodal-generation service.
func editCall(f *fakeupstream.DashScope, model, request string) upstream.Call {
	c := call(f, model, request)
	c.Backend.Options = map[string]string{dashscope.OptionAPI: dashscope.APIMultimodalGeneration}
	return c
}

func TestSubmitMultimodalEdit(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	s, err := a.Submit(context.Background(), editCall(f, "qwen-image-edit-plus", editRequest))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(BeEmpty(), "a synchronous service has no task")
	g.Expect(s.Final).NotTo(BeNil())
	g.Expect(s.Final.State).To(Equal(upstream.Succeeded))
	g.Expect(s.Final.Outputs).To(HaveLen(1))
	g.Expect(s.Final.Outputs[0].URL).To(HavePrefix(f.URL + "/oss/"))

	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal(dashscope.PathMultimodalGeneration))
	g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
	g.Expect(sent.Header.Get("X-DashScope-Async")).To(BeEmpty())
	g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "qwen-image-edit-plus",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"image": "https://img.example/a.png"},
			map[string]any{"image": "https://img.example/b.png"},
			map[string]any{"text": "put the clock by the vase"},
		}}}},
		"parameters": map[string]any{"size": "1280*720", "n": float64(1), "negative_prompt": "blur",
			"prompt_extend": false, "watermark": false, "seed": float64(42)}}))

	resp, err := fakeupstream.Client().Get(s.Final.Outputs[0].URL) // downloaded without the credential
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

	_, err = a.Poll(context.Background(), editCall(f, "qwen-image-edit-plus", editRequest), "x")
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent))
}

func TestMultimodalEditFailures(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewDashScope()
	defer f.Close()
	a := dashscope.Adapter{Client: fakeupstream.Client()}
	ctx := context.Background()

	// Content inspection refuses the edit at once: never retried elsewhere.
	f.SetPlan(fakeupstream.DashScopePlan{FailCode: "DataInspectionFailed", FailMessage: "Output data may contain inappropriate content."})
	_, err := a.Submit(ctx, editCall(f, "qwen-image-edit-plus", editRequest))
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal(upstream.CodePolicy))
	g.Expect(ue.Message).To(Equal("Output data may contain inappropriate content."))
	f.SetPlan(fakeupstream.DashScopePlan{})

	// Throttling moves to the next backend.
	f.Fail(fakeupstream.DashScopeFailure{Status: 429, Code: "Throttling.RateQuota", Message: "Requests rate limit exceeded."})
	_, err = a.Submit(ctx, editCall(f, "qwen-image-edit-plus", editRequest))
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeTrue())

	// The fake checks the size like DashScope: each side 512 to 2048.
	_, err = a.Submit(ctx, editCall(f, "qwen-image-edit-plus", `{"prompt":"p","size":"256x256","image_urls":["https://a/1"]}`))
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal("InvalidParameter"))

	// A key the service refuses fails over.
	c := editCall(f, "qwen-image-edit-plus", editRequest)
	c.Backend.APIKey = "wrong"
	_, err = a.Submit(ctx, c)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Code).To(Equal("InvalidApiKey"))

	// Without a reference image (or with more than three) nothing is sent.
	before := len(f.Requests())
	_, err = a.Submit(ctx, editCall(f, "qwen-image-edit-plus", `{"prompt":"p"}`))
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	_, err = a.Submit(ctx, editCall(f, "qwen-image-edit-plus", `{"prompt":"p","image_urls":["https://a/1","https://a/2","https://a/3","https://a/4"]}`))
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	g.Expect(f.Requests()).To(HaveLen(before))

	// An unknown api option is the backend's configuration error.
	c = call(f, "qwen-image-edit-plus", editRequest)
	c.Backend.Options = map[string]string{dashscope.OptionAPI: "chat"}
	_, err = a.Submit(ctx, c)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	g.Expect(f.Requests()).To(HaveLen(before))

	// The edit model on the task API is refused by the fake, as by DashScope.
	_, err = a.Submit(ctx, call(f, "qwen-image-edit-plus", editRequest))
	g.Expect(classOf(t, err).Code).To(Equal("InvalidParameter"))
}
