package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/openai"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func videoCall(f *fakeupstream.OpenAIVideos, request string, duration int64) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "oa", Provider: openai.Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: "sora-2"},
		Kind:    upstream.Video, TaskID: "task_1", Request: json.RawMessage(request), DurationSeconds: duration,
	}
}

func TestVideoSubmitPollDownload(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewOpenAIVideos()
	defer f.Close()
	mp4 := []byte("\x00\x00\x00\x18ftypmp42 a short clip")
	f.SetPlan(fakeupstream.VideoPlan{Polls: 2, RateLimited: 1, RetryAfter: "7", Output: mp4})
	p := openai.New(fakeupstream.Client())
	ctx := context.Background()
	c := videoCall(f, `{"model":"brand-video","prompt":"a lighthouse","duration":6,"ratio":"16:9",
		"image_with_roles":[{"url":"https://img.example/first.png","role":"first_frame"}]}`, 6)

	s, err := p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(HavePrefix("video_"))
	g.Expect(s.Final).To(BeNil())
	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal("/v1/videos"))
	g.Expect(sent.Header.Get("Authorization")).To(Equal("Bearer " + f.Key()))
	g.Expect(sent.JSON()).To(Equal(map[string]any{"model": "sora-2", "prompt": "a lighthouse", "seconds": "8",
		"size": "1280x720", "input_reference": map[string]any{"image_url": "https://img.example/first.png"}}))

	_, err = p.Poll(ctx, c, s.ID)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Transient))
	g.Expect(ue.RetryAfter).To(Equal(7 * time.Second))

	st, err := p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Running))
	st, err = p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(upstream.Status{State: upstream.Running, Progress: 50}))

	st, err = p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.VideoSeconds).To(Equal(int64(8)))
	g.Expect(st.Outputs).To(Equal([]upstream.Output{{Data: mp4, ContentType: "video/mp4"}}))
	g.Expect(f.Count(http.MethodGet, "/v1/videos/"+s.ID+"/content")).To(Equal(1))
}

func TestVideoFailures(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewOpenAIVideos()
	defer f.Close()
	p := openai.New(fakeupstream.Client())
	ctx := context.Background()
	c := videoCall(f, `{"prompt":"x"}`, 4)

	// A moderated video fails with the policy code.
	f.SetPlan(fakeupstream.VideoPlan{FailCode: "moderation_blocked", FailMessage: "Your request was blocked by our moderation system."})
	s, err := p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Failed))
	g.Expect(st.ErrorCode).To(Equal(upstream.CodePolicy))
	g.Expect(st.ErrorMessage).To(Equal("Your request was blocked by our moderation system."))

	// A submission refused for policy is permanent, with the policy code.
	f.Fail(fakeupstream.ImageFailure{Status: 400, Code: "content_policy_violation", Message: "prompt refused"})
	_, err = p.Submit(ctx, c)
	ue := classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal(upstream.CodePolicy))
	g.Expect(ue.Message).To(Equal("prompt refused"))

	// 429 and 5xx on submission move on, Retry-After kept; quota too.
	f.Fail(fakeupstream.ImageFailure{Status: 429, RetryAfter: "3"},
		fakeupstream.ImageFailure{Status: 503},
		fakeupstream.ImageFailure{Status: 429, Code: "insufficient_quota", Type: "insufficient_quota", Message: "You exceeded your current quota"})
	for _, want := range []time.Duration{3 * time.Second, 0, 0} {
		_, err = p.Submit(ctx, c)
		ue = classOf(t, err)
		g.Expect(ue.Class).To(Equal(upstream.Failover))
		g.Expect(ue.Retryable).To(BeTrue())
		g.Expect(ue.RetryAfter).To(Equal(want))
	}

	// A bad request is permanent and keeps the upstream's own code, which
	// is no policy code (the task fails with generation_failed); too long a
	// video goes elsewhere.
	_, err = p.Submit(ctx, videoCall(f, `{"prompt":""}`, 0))
	ue = classOf(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal("missing_required_parameter"))
	_, err = p.Submit(ctx, videoCall(f, `{"prompt":"x","duration":20}`, 20))
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Failover))

	// Cancel deletes the video.
	f.SetPlan(fakeupstream.VideoPlan{Polls: 5})
	s, err = p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Cancel(ctx, c, s.ID)).To(Succeed())
	g.Expect(f.Deleted(s.ID)).To(BeTrue())
	_, err = p.Poll(ctx, c, s.ID)
	g.Expect(classOf(t, err).Class).To(Equal(upstream.Permanent), "a deleted video is lost")
}
