package ark_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/ark"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func call(f *fakeupstream.Ark, kind upstream.Kind, model, request string, outputs int64) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "ark-cn", Provider: ark.Name, BaseURL: f.URL + "/api/v3", APIKey: f.Key(), UpstreamModel: model},
		Kind:    kind, TaskID: "task_1", Request: json.RawMessage(request), Outputs: outputs,
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

func TestImageGroup(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	f.SetPlan(fakeupstream.ArkPlan{Images: 2})
	c := call(f, upstream.Image, "doubao-seedream-4-0-250828", `{"model":"seedream","prompt":"four seasons of one garden","n":3,"size":"4:3",
		"image_urls":["https://img.example/a.png","https://img.example/b.png"],
		"metadata":{"resolution":"2K","optimize_prompt_options":{"mode":"fast"},"sequential_image_generation":"auto",
		"sequential_image_generation_options":{"max_images":5},"watermark":false}}`, 3)

	s, err := ark.New(fakeupstream.Client()).Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	sent := f.Requests()[0]
	g.Expect(sent.Method + " " + sent.Path).To(Equal("POST /api/v3/images/generations"))
	g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
	g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "doubao-seedream-4-0-250828", "prompt": "four seasons of one garden",
		"image": []any{"https://img.example/a.png", "https://img.example/b.png"}, "size": "2304x1728",
		"sequential_image_generation":         "auto",
		"sequential_image_generation_options": map[string]any{"max_images": float64(3)}, // never more than n
		"optimize_prompt_options":             map[string]any{"mode": "fast"},
		"response_format":                     "url", "stream": false, "watermark": false}))
	g.Expect(s.ID).To(BeEmpty())
	g.Expect(s.Final).NotTo(BeNil())
	g.Expect(s.Final.State).To(Equal(upstream.Succeeded))
	g.Expect(s.Final.Outputs).To(HaveLen(2), "the model made two of the three allowed")
	g.Expect(s.Final.Outputs[0].URL).To(HavePrefix(f.URL + "/tos/"))
	tokens := int64(2 * 2304 * 1728 / 256)
	g.Expect(s.Final.Usage).To(Equal(&upstream.ImageUsage{OutputTokens: tokens, TotalTokens: tokens}))
}

func TestImageSingleInlineAndRefused(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	c := call(f, upstream.Image, "seedream-4-0-250828", `{"prompt":"a fox","n":1,"size":"auto","image_urls":["https://img.example/fox.png"],
		"metadata":{"resolution":"4K","sequential_image_generation":"disabled","watermark":true}}`, 1)
	c.Backend.Options = map[string]string{"responseFormat": "b64_json"}
	s, err := ark.New(fakeupstream.Client()).Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Requests()[0].JSON()).To(Equal(map[string]any{"model": "seedream-4-0-250828", "prompt": "a fox",
		"image": "https://img.example/fox.png", "size": "4K", "sequential_image_generation": "disabled",
		"response_format": "b64_json", "stream": false, "watermark": true}))
	want, _ := fakeupstream.DefaultOutput("image", 0)
	g.Expect(s.Final.Outputs).To(Equal([]upstream.Output{{Data: want, ContentType: "image/png"}}))

	// Every image of the answer withheld by moderation: a policy failure.
	f.SetPlan(fakeupstream.ArkPlan{Refused: map[int]bool{0: true}})
	s, err = ark.New(fakeupstream.Client()).Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Final.State).To(Equal(upstream.Failed))
	g.Expect(s.Final.ErrorCode).To(Equal(upstream.CodePolicy))
	g.Expect(s.Final.ErrorMessage).To(ContainSubstring("output image may contain sensitive information"))
}

func TestImageSizes(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ark.ImageSize("1:1", "1K")).To(Equal("1024x1024"))
	g.Expect(ark.ImageSize("16:9", "4K")).To(Equal("5404x3040"), "the contract's own size")
	g.Expect(ark.ImageSize("21:9", "1K")).To(Equal("1512x648"))
	g.Expect(ark.ImageSize("3:2", "4K")).To(Equal("4992x3328"))
	g.Expect(ark.ImageSize("auto", "2K")).To(Equal("2K"))
}

func TestSubmitErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	img := call(f, upstream.Image, "doubao-seedream-4-0-250828", `{"prompt":"x","n":1,"size":"1:1","metadata":{"resolution":"2K"}}`, 1)
	a := ark.New(fakeupstream.Client())
	ctx := context.Background()

	f.Fail(fakeupstream.ArkFailure{Status: http.StatusTooManyRequests, Code: "RateLimitExceeded.EndpointRPMExceeded", RetryAfter: "7"})
	_, err := a.Submit(ctx, img)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.RetryAfter).To(Equal(7 * time.Second))

	f.Fail(fakeupstream.ArkFailure{Status: http.StatusBadRequest, Code: "InputTextSensitiveContentDetected",
		Message: "The request failed because the input text may contain sensitive information."})
	_, err = a.Submit(ctx, img)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal(upstream.CodePolicy))
	g.Expect(ue.Message).To(HavePrefix("The request failed because the input text may contain sensitive information."))

	f.Fail(fakeupstream.ArkFailure{Status: http.StatusForbidden, Code: "AccountOverdueError", Message: "overdue"})
	_, err = a.Submit(ctx, img)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover), "the backend's account, not the request")

	other := img
	other.Backend.UpstreamModel = "ep-not-mine"
	_, err = a.Submit(ctx, other)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover), "a model the account lacks may be on another backend")
	g.Expect(ue.Status).To(Equal(http.StatusNotFound))

	bad := img
	bad.Request = json.RawMessage(`{"prompt":"x","n":1,"size":"1:1","metadata":{"resolution":"2K"}}`)
	bad.Backend.Options = map[string]string{"size": "100x100"}
	_, err = a.Submit(ctx, bad)
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Status).To(Equal(http.StatusBadRequest))
	g.Expect(ue.Code).To(Equal("InvalidParameter"))

	wrongKey := img
	wrongKey.Backend.APIKey = "sk-other"
	_, err = a.Submit(ctx, wrongKey)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))
}

func TestVideoTaskLifecycle(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	mp4 := []byte("\x00\x00\x00\x18ftypmp42 seedance")
	f.SetPlan(fakeupstream.ArkPlan{Queued: 1, Polls: 1, RateLimited: 1, RetryAfter: "3", Video: mp4, Ratio: "4:3"})
	c := call(f, upstream.Video, "doubao-seedance-1-0-pro-250528", `{"prompt":"the cat walks","duration":5,"ratio":"adaptive",
		"resolution":"720p","audio":false,"watermark":false,"seed":9,
		"image_with_roles":[{"url":"https://img.example/first.png","role":"first_frame"},{"url":"https://img.example/last.png","role":"last_frame"}]}`, 1)
	c.Backend.Options = map[string]string{"expectedDuration": "10s"}
	a := ark.New(fakeupstream.Client())
	ctx := context.Background()

	s, err := a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(HavePrefix("cgt-"))
	g.Expect(f.Requests()[0].Path).To(Equal("/api/v3/contents/generations/tasks"))
	g.Expect(f.Requests()[0].JSON()).To(Equal(map[string]any{"model": "doubao-seedance-1-0-pro-250528",
		"content": []any{
			map[string]any{"type": "text", "text": "the cat walks"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://img.example/first.png"}, "role": "first_frame"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://img.example/last.png"}, "role": "last_frame"},
		},
		"ratio": "adaptive", "duration": float64(5), "resolution": "720p", "seed": float64(9), "watermark": false, "generate_audio": false}))

	_, err = a.Poll(ctx, c, s.ID)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Transient))
	g.Expect(ue.RetryAfter).To(Equal(3 * time.Second))

	st, err := a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running}), "queued")

	c.Elapsed = 5 * time.Second
	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Running))
	g.Expect(st.Progress).To(Equal(50), "5 + 90 × 5s/10s")

	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.VideoSeconds).To(Equal(int64(5)))
	g.Expect(st.Outputs).To(HaveLen(1))
	g.Expect(st.Outputs[0].URL).To(HavePrefix(f.URL + "/tos/video/"))
	tokens := fakeupstream.ArkVideoTokens(1112, 834, 24, 5)
	g.Expect(st.Usage).To(Equal(&upstream.ImageUsage{OutputTokens: tokens, TotalTokens: tokens}))
	resp, err := fakeupstream.Client().Get(st.Outputs[0].URL)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "the signed link needs no credential")

	// A finished task cannot be cancelled: DELETE removes its record.
	g.Expect(a.Cancel(ctx, c, s.ID)).To(Succeed())
	g.Expect(f.Status(s.ID)).To(BeEmpty())
	_, err = a.Poll(ctx, c, s.ID)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent), "a task the upstream no longer knows")
}

func TestVideoReferencesFailureAndCancel(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewArk()
	defer f.Close()
	f.SetPlan(fakeupstream.ArkPlan{Polls: 1, FailCode: "OutputVideoSensitiveContentDetected", FailMessage: "The output video may contain sensitive information."})
	c := call(f, upstream.Video, "doubao-seedance-2-0-260128", `{"prompt":"dance like video 1","duration":-1,"ratio":"16:9","resolution":"480p",
		"reference_images":["https://img.example/r.png"],"video_list":[{"video_url":"https://vid.example/a.mp4","duration":4}],
		"video_with_roles":[{"url":"https://vid.example/b.mp4","role":"reference_video"}],
		"audio_with_roles":[{"url":"https://aud.example/c.mp3","role":"reference_audio"}]}`, 1)
	a := ark.New(fakeupstream.Client())
	ctx := context.Background()
	s, err := a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Requests()[0].JSON()["content"]).To(Equal([]any{
		map[string]any{"type": "text", "text": "dance like video 1"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://img.example/r.png"}, "role": "reference_image"},
		map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://vid.example/a.mp4"}, "role": "reference_video"},
		map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://vid.example/b.mp4"}, "role": "reference_video"},
		map[string]any{"type": "audio_url", "audio_url": map[string]any{"url": "https://aud.example/c.mp3"}, "role": "reference_audio"},
	}))
	st, err := a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Running))
	g.Expect(a.Cancel(ctx, c, s.ID)).NotTo(Succeed(), "Ark cannot cancel a running task")
	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Failed, ErrorCode: upstream.CodePolicy,
		ErrorMessage: "The output video may contain sensitive information."}))

	// A queued task is cancelled.
	f.SetPlan(fakeupstream.ArkPlan{Queued: 100})
	s, err = a.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Cancel(ctx, c, s.ID)).To(Succeed())
	g.Expect(f.Status(s.ID)).To(Equal("cancelled"))
	st, err = a.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Failed))

	// Files and web links have no Ark content item: another backend may take them.
	c.Request = json.RawMessage(`{"prompt":"x","metadata":{"media":[{"type":"link","url":"https://example.com"}]}}`)
	_, err = a.Submit(ctx, c)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))

	// Frames mixed with references are refused by Seedance.
	c.Request = json.RawMessage(`{"prompt":"x","image_with_roles":[{"url":"https://img.example/f.png","role":"first_frame"}],
		"reference_images":["https://img.example/r.png"]}`)
	_, err = a.Submit(ctx, c)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Message).To(ContainSubstring("first/last frame content cannot be mixed with reference media content"))
}
