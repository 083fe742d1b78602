package bfl_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/bfl"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func call(f *fakeupstream.BFL, request string) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "bfl", Provider: bfl.Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "flux-kontext-pro"},
		Kind:    upstream.Image, TaskID: "task_1", Request: json.RawMessage(request), Outputs: 1,
	}
}

func classOf(t *testing.T, err error) *upstream.Error {
	t.Helper()
	ue, ok := upstream.As(err)
	if !ok {
		t.Fatalf("not an *upstream.Error: %v", err)
	}
	return ue
}

func TestEditSubmitPollReady(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBFL()
	defer f.Close()
	f.SetPlan(fakeupstream.BFLPlan{Polls: 2, RateLimited: 1, RetryAfter: "3"})
	a := bfl.New(fakeupstream.Client())
	ctx := context.Background()
	c := call(f, `{"model":"brand-kontext-pro","prompt":"make it snow","size":"match_input_image",
		"image_urls":["https://img.example/house.png"],
		"metadata":{"response_format":"jpg","safety_tolerance":4,"prompt_upsampling":true,"seed":42}}`)

	s, err := a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	// The polling URL is on the backend's host, so it is the task's ID.
	g.Expect(s.ID).To(HavePrefix(f.URL + "/v1/get_result?id=bfl-"))
	sent := f.Requests()[0]
	g.Expect(sent.Method + " " + sent.Path).To(Equal("POST /v1/flux-kontext-pro"))
	g.Expect(sent.Header.Get("x-key")).To(Equal(f.Key()))
	g.Expect(sent.Header.Get("Authorization")).To(BeEmpty())
	// match_input_image is BFL's default with an input image: no aspect_ratio.
	g.Expect(sent.JSON()).To(Equal(map[string]any{"prompt": "make it snow", "input_image": "https://img.example/house.png",
		"output_format": "jpeg", "safety_tolerance": float64(4), "prompt_upsampling": true, "seed": float64(42)}))

	_, err = a.Poll(ctx, c, s.ID)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Transient))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.RetryAfter).To(Equal(3 * time.Second))

	st, err := a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running, Progress: 0}))
	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running, Progress: 50}))

	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.Outputs).To(HaveLen(1))
	g.Expect(st.Outputs[0].URL).To(HavePrefix(f.URL + "/samples/"))
	g.Expect(st.Outputs[0].URL).To(ContainSubstring(".jpg?"))
	for _, r := range f.Requests()[1:] {
		g.Expect(r.Path).To(Equal("/v1/get_result"))
		g.Expect(r.Header.Get("x-key")).To(Equal(f.Key()))
	}
	// The signed sample needs no key.
	resp, err := fakeupstream.Client().Get(st.Outputs[0].URL)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func TestTextToImageAndDataURL(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBFL()
	defer f.Close()
	a := bfl.New(fakeupstream.Client())
	ctx := context.Background()

	_, err := a.Submit(ctx, call(f, `{"prompt":"a red fox","size":"21:9","metadata":{"response_format":"png","safety_tolerance":2,"prompt_upsampling":false}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Requests()[0].JSON()).To(Equal(map[string]any{"prompt": "a red fox", "aspect_ratio": "21:9",
		"output_format": "png", "safety_tolerance": float64(2), "prompt_upsampling": false}))

	_, err = a.Submit(ctx, call(f, `{"prompt":"x","size":"1:1","image_urls":["data:image/png;base64,iVBORw0KGgo="]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Requests()[1].JSON()["input_image"]).To(Equal("iVBORw0KGgo="))
}

func TestModerationAndErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBFL()
	defer f.Close()
	a := bfl.New(fakeupstream.Client())
	ctx := context.Background()
	c := call(f, `{"prompt":"x"}`)

	for _, final := range []string{bfl.StatusRequestModerated, bfl.StatusContentModerated} {
		f.SetPlan(fakeupstream.BFLPlan{Final: final})
		s, err := a.Submit(ctx, c)
		g.Expect(err).NotTo(HaveOccurred())
		st, err := a.Poll(ctx, c, s.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.State).To(Equal(upstream.Failed))
		g.Expect(st.ErrorCode).To(Equal(upstream.CodePolicy))
		g.Expect(st.ErrorMessage).To(ContainSubstring(final))
	}

	f.SetPlan(fakeupstream.BFLPlan{Final: bfl.StatusError})
	s, err := a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Failed))
	g.Expect(st.ErrorCode).To(BeEmpty())
	g.Expect(st.ErrorMessage).To(ContainSubstring("Generation failed"))

	// A bare ID polls get_result on the base URL; an unknown task fails.
	_, err = a.Poll(ctx, c, "missing")
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent))
	g.Expect(f.Requests()[len(f.Requests())-1].Query).To(Equal("id=missing"))

	// Submission failures.
	f.FailSubmits(fakeupstream.BFLFailure{Status: 402, Detail: "Insufficient credits"},
		fakeupstream.BFLFailure{Status: 429, Detail: "Too many active tasks", RetryAfter: "9"},
		fakeupstream.BFLFailure{Status: 503, Detail: "Service unavailable"},
		fakeupstream.BFLFailure{Status: 400, Detail: "Bad input image"})
	_, err = a.Submit(ctx, c)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeFalse())
	g.Expect(ue.Message).To(ContainSubstring("insufficient credits"))
	_, err = a.Submit(ctx, c)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.RetryAfter).To(Equal(9 * time.Second))
	_, err = a.Submit(ctx, c)
	ue = classOf(t, err)
	g.Expect(ue.Retryable).To(BeTrue())
	_, err = a.Submit(ctx, c)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Message).To(Equal("Bad input image"))

	// The fake's validation (FastAPI's 422) is a permanent refusal.
	_, err = a.Submit(ctx, call(f, `{"prompt":"x","metadata":{"safety_tolerance":9}}`))
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Message).To(ContainSubstring("body.safety_tolerance"))

	// A wrong key moves to another backend.
	bad := call(f, `{"prompt":"x"}`)
	bad.Backend.APIKey = "wrong"
	_, err = a.Submit(ctx, bad)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Message).To(ContainSubstring("credential"))
}

func TestPollingURLHost(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewBFL()
	defer f.Close()
	a := bfl.New(fakeupstream.Client())
	c := call(f, `{"prompt":"x"}`)
	// A polling URL on another host would receive the key: refused.
	_, err := a.Poll(context.Background(), c, "https://elsewhere.example/v1/get_result?id=1")
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent))
	g.Expect(f.Requests()).To(BeEmpty())

	c.Kind = upstream.Video
	_, err = a.Submit(context.Background(), c)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
	g.Expect(strings.Contains(err.Error(), "images only")).To(BeTrue())
}
