package simulated_test

import (
	"bytes"
	"context"
	"image/gif"
	"image/png"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/simulated"
)

func TestMediaDirectives(t *testing.T) {
	g := NewWithT(t)
	g.Expect(simulated.ParseMediaDirectives([]byte(`{"prompt":"a cat"}`))).To(Equal(simulated.MediaDirectives{}))
	g.Expect(simulated.ParseMediaDirectives([]byte(`{"prompt":"[sim:fail] a cat"}`))).To(Equal(simulated.MediaDirectives{Fail: true}))
	g.Expect(simulated.ParseMediaDirectives([]byte(`{"prompt":"a cat [sim:delay=1.5s]"}`))).To(Equal(simulated.MediaDirectives{Delay: 1500 * time.Millisecond}))
	g.Expect(simulated.ParseMediaDirectives([]byte(`{"prompt":"[sim:delay=soon]"}`))).To(Equal(simulated.MediaDirectives{}))
	g.Expect(simulated.ParseMediaDirectives([]byte(`not json`))).To(Equal(simulated.MediaDirectives{}))
}

func TestSimulatedImageIsARealPNGOfTheRequestedAspect(t *testing.T) {
	for _, c := range []struct {
		req  string
		w, h int
	}{
		{`{"size":"16:9"}`, 64, 36},
		{`{"size":"9:16"}`, 36, 64},
		{`{"size":"1024x768"}`, 64, 48},
		{`{"size":"512*1024"}`, 32, 64},
		{`{"size":"auto"}`, 64, 64},
		{`{}`, 64, 64},
	} {
		g := NewWithT(t)
		raw, err := simulated.RenderImage("task_x", 0, []byte(c.req))
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := png.DecodeConfig(bytes.NewReader(raw))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]int{cfg.Width, cfg.Height}).To(Equal([]int{c.w, c.h}), c.req)
		again, _ := simulated.RenderImage("task_x", 0, []byte(c.req))
		g.Expect(again).To(Equal(raw), "deterministic")
	}
}

func TestSimulatedVideoIsAnAnimatedGIF(t *testing.T) {
	g := NewWithT(t)
	raw, err := simulated.RenderVideo("task_v", []byte(`{"ratio":"16:9"}`))
	g.Expect(err).NotTo(HaveOccurred())
	anim, err := gif.DecodeAll(bytes.NewReader(raw))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(anim.Image).To(HaveLen(8))
	g.Expect(anim.Config.Width).To(Equal(64))
	g.Expect(anim.Config.Height).To(Equal(36))
}

// A simulated task runs for its delay, polled on a cadence that never
// overshoots the expected end, then yields its rendered outputs.
func TestMediaTaskRunsForItsDelay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var m simulated.Media
	c := upstream.Call{Kind: upstream.Image, TaskID: "task_i", Request: []byte(`{"prompt":"a cat","size":"1:1"}`),
		Outputs: 2, InputImages: 1, Backend: upstream.Backend{Options: map[string]string{"delay": "4s"}}}
	s, err := m.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(Equal("sim-task_i"))
	g.Expect(s.NextPoll).To(Equal(250 * time.Millisecond))

	c.Elapsed = 1600 * time.Millisecond
	st, err := m.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Running))
	g.Expect(st.Progress).To(Equal(40))
	g.Expect(st.NextPoll).To(Equal(800 * time.Millisecond))
	c.Elapsed = 3900 * time.Millisecond
	st, _ = m.Poll(ctx, c, s.ID)
	g.Expect(st.NextPoll).To(Equal(100*time.Millisecond), "never past the expected end")

	c.Elapsed = 4 * time.Second
	st, err = m.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.Outputs).To(HaveLen(2))
	g.Expect(st.Outputs[0].ContentType).To(Equal("image/png"))
	g.Expect(st.Usage.Valid()).To(BeTrue())
	g.Expect(st.Usage.InputTokens).To(Equal(int64(2 + simulated.ImageInputTokens)))
	g.Expect(st.Usage.OutputTokens).To(Equal(int64(2 * simulated.ImageOutputTokens)))

	v := upstream.Call{Kind: upstream.Video, TaskID: "task_v", Request: []byte(`{"prompt":"waves"}`), DurationSeconds: -1,
		Backend: upstream.Backend{Options: map[string]string{"delay": "0s"}}}
	st, _ = m.Poll(ctx, v, "sim-task_v")
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.VideoSeconds).To(Equal(int64(media.VideoDefaultDuration)))
	g.Expect(st.Outputs[0].ContentType).To(Equal("image/gif"))

	f := upstream.Call{Kind: upstream.Image, Request: []byte(`{"prompt":"[sim:fail] [sim:delay=1s]"}`), Elapsed: time.Second}
	st, _ = m.Poll(ctx, f, "sim-x")
	g.Expect(st.State).To(Equal(upstream.Failed))
	g.Expect(st.ErrorMessage).To(ContainSubstring("[sim:fail]"))
}

func TestReviewDecides(t *testing.T) {
	g := NewWithT(t)
	var m simulated.Media
	now := time.Now()
	b := upstream.Backend{}
	decide := func(key string, prepared time.Time) string {
		d, err := m.Decide(context.Background(), b, upstream.ReviewAsset{Key: key, PreparedAt: prepared}, now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Ref).To(BeEmpty(), "the simulated service keeps no library")
		return d.State
	}
	g.Expect(decide("https://x/a.png", now)).To(Equal(upstream.ReviewPending))
	g.Expect(decide("https://x/a.png", now.Add(-simulated.DefaultReviewTime))).To(Equal(upstream.ReviewPassed))
	g.Expect(decide("https://x/reject.png", now.Add(-time.Hour))).To(Equal(upstream.ReviewRejected))
	g.Expect(decide("https://x/slow.png", now.Add(-time.Hour))).To(Equal(upstream.ReviewPending))
}
