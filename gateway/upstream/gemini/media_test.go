package gemini_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/gemini"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func mediaCall(f *fakeupstream.GeminiMedia, kind upstream.Kind, model, request string) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "google", Provider: gemini.Name, BaseURL: f.URL, APIKey: f.Key(), UpstreamModel: model},
		Kind:    kind, TaskID: "task_1", Request: json.RawMessage(request), Outputs: 1,
	}
}

// loopbackDownloads is a download client that may reach the test's
// servers on loopback (as --allow-private-networks would allow).
func loopbackDownloads() *http.Client {
	g := &netguard.Guard{}
	g.AllowLoopback()
	return upstream.NewEgress(upstream.EgressOptions{Guard: g, RootCAs: fakeupstream.RootCAs()}).Downloads
}

// refServer serves reference images on loopback (allowed for the test).
func refServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	img := fakeupstream.PNG(4, 4, 99)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	}))
	t.Cleanup(s.Close)
	return s, img
}

func asError(t *testing.T, err error) *upstream.Error {
	t.Helper()
	ue, ok := upstream.As(err)
	if !ok {
		t.Fatalf("not an *upstream.Error: %v", err)
	}
	return ue
}

func TestImageGenerateWithReference(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	refs, img := refServer(t)
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	c := mediaCall(f, upstream.Image, "gemini-3-pro-image-preview",
		`{"prompt":"a cat in a hat","n":1,"size":"16:9","image_urls":["`+refs.URL+`/cat.png"],"metadata":{"resolution":"4K"}}`)

	s, err := p.Submit(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(BeEmpty())
	g.Expect(s.Final).NotTo(BeNil())
	st := *s.Final
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	want, _ := fakeupstream.DefaultOutput("image", 0)
	g.Expect(st.Outputs).To(Equal([]upstream.Output{{Data: want, ContentType: "image/png"}}), "the thought draft is skipped")
	// "a cat in a hat" is 14 bytes: 4 text tokens; one reference image.
	g.Expect(st.Usage).To(Equal(&upstream.ImageUsage{InputTokens: 4 + 258, OutputTokens: 8 + 2000 + 180, TotalTokens: 262 + 2188,
		InputTokensDetails:  &upstream.ImageInputDetails{TextTokens: 4, ImageTokens: 258},
		OutputTokensDetails: &upstream.ImageOutputDetails{TextTokens: 188, ImageTokens: 2000}}))

	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal("/v1beta/models/gemini-3-pro-image-preview:generateContent"))
	g.Expect(sent.Header.Get("x-goog-api-key")).To(Equal(f.Key()))
	g.Expect(sent.Query).To(BeEmpty(), "the key never goes in the URL")
	g.Expect(sent.JSON()).To(Equal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{
			map[string]any{"text": "a cat in a hat"},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(img)}}}}},
		"generationConfig": map[string]any{"responseModalities": []any{"TEXT", "IMAGE"},
			"imageConfig": map[string]any{"aspectRatio": "16:9", "imageSize": "4K"}}}))
}

func TestImageSizesAndOptions(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	for _, tc := range []struct {
		request string
		options map[string]string
		want    any
	}{
		{`{"prompt":"x","size":"1280x720"}`, nil, map[string]any{"aspectRatio": "16:9"}},
		{`{"prompt":"x","size":"match_input_image"}`, nil, nil},
		{`{"prompt":"x","size":"1:1","resolution":"2K"}`, map[string]string{"imageSize": "omit"}, map[string]any{"aspectRatio": "1:1"}},
		{`{"prompt":"x","size":"auto","metadata":{"resolution":"2K"}}`, nil, map[string]any{"imageSize": "2K"}},
	} {
		c := mediaCall(f, upstream.Image, "gemini-2.5-flash-image", tc.request)
		c.Backend.Options = tc.options
		_, err := p.Submit(context.Background(), c)
		g.Expect(err).NotTo(HaveOccurred(), tc.request)
		cfg := f.Requests()[len(f.Requests())-1].JSON()["generationConfig"].(map[string]any)
		if tc.want == nil {
			g.Expect(cfg).NotTo(HaveKey("imageConfig"), tc.request)
		} else {
			g.Expect(cfg["imageConfig"]).To(Equal(tc.want), tc.request)
		}
	}
	before := len(f.Requests())
	for _, req := range []string{`{"prompt":"x","size":"9:21"}`, `{"prompt":"x","n":2}`} {
		_, err := p.Submit(context.Background(), mediaCall(f, upstream.Image, "gemini-2.5-flash-image", req))
		g.Expect(asError(t, err).Class).To(Equal(upstream.Failover), req)
	}
	g.Expect(f.Requests()).To(HaveLen(before), "nothing was sent")
}

func TestImageRefusalsAndErrors(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	refs, _ := refServer(t)
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	ctx := context.Background()
	c := mediaCall(f, upstream.Image, "gemini-2.5-flash-image", `{"prompt":"something bad"}`)

	f.SetImagePlan(fakeupstream.GeminiImagePlan{BlockReason: "PROHIBITED_CONTENT"})
	s, err := p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Final.State).To(Equal(upstream.Failed))
	g.Expect(s.Final.ErrorCode).To(Equal(upstream.CodePolicy))
	g.Expect(s.Final.ErrorMessage).To(ContainSubstring("PROHIBITED_CONTENT"))

	f.SetImagePlan(fakeupstream.GeminiImagePlan{FinishReason: "IMAGE_SAFETY"})
	s, err = p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Final.ErrorCode).To(Equal(upstream.CodePolicy))

	f.SetImagePlan(fakeupstream.GeminiImagePlan{FinishReason: "NO_IMAGE"})
	s, err = p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Final.State).To(Equal(upstream.Failed))
	g.Expect(s.Final.ErrorCode).To(BeEmpty(), "no image is not a refusal")

	f.SetImagePlan(fakeupstream.GeminiImagePlan{})
	f.Fail(fakeupstream.GeminiFailure{Status: 429, Message: "Resource has been exhausted (e.g. check quota).", RetryDelay: "7s"})
	_, err = p.Submit(ctx, c)
	ue := asError(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover))
	g.Expect(ue.Retryable).To(BeTrue())
	g.Expect(ue.RetryAfter).To(Equal(7 * time.Second))

	f.Fail(fakeupstream.GeminiFailure{Status: 400, Message: "The prompt could not be submitted. It may violate our usage guidelines."})
	_, err = p.Submit(ctx, c)
	ue = asError(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Permanent))
	g.Expect(ue.Code).To(Equal(upstream.CodePolicy))

	bad := c
	bad.Backend.APIKey = "wrong"
	_, err = p.Submit(ctx, bad)
	ue = asError(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Failover), "an invalid key is the backend's, not the request's")
	g.Expect(ue.Retryable).To(BeFalse())

	missing := mediaCall(f, upstream.Image, "gemini-2.5-flash-image", `{"prompt":"x","image_urls":["`+refs.URL+`/missing.png"]}`)
	before := len(f.Requests())
	_, err = p.Submit(ctx, missing)
	g.Expect(asError(t, err).Class).To(Equal(upstream.Permanent))
	g.Expect(f.Requests()).To(HaveLen(before))
}

func TestVeoSubmitPollDownload(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	refs, img := refServer(t)
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	ctx := context.Background()
	mp4 := []byte("\x00\x00\x00\x18ftypmp42 veo clip")
	f.SetVideoPlan(fakeupstream.VeoPlan{Polls: 1, RateLimited: 1, RetryDelay: "3s", Output: mp4})
	c := mediaCall(f, upstream.Video, "veo-3.1-generate-preview", `{"prompt":"a lighthouse","duration":5,"ratio":"16:9",
		"resolution":"720p","image_with_roles":[{"url":"`+refs.URL+`/a.png","role":"first_frame"},{"url":"`+refs.URL+`/b.png","role":"last_frame"}]}`)
	c.Backend.Options = map[string]string{"personGeneration": "allow_adult"}

	s, err := p.Submit(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ID).To(MatchRegexp(`^models/veo-3.1-generate-preview/operations/op\d+$`))
	sent := f.Requests()[0]
	g.Expect(sent.Path).To(Equal("/v1beta/models/veo-3.1-generate-preview:predictLongRunning"))
	g.Expect(sent.Header.Get("x-goog-api-key")).To(Equal(f.Key()))
	b64 := base64.StdEncoding.EncodeToString(img)
	g.Expect(sent.JSON()).To(Equal(map[string]any{
		"instances": []any{map[string]any{"prompt": "a lighthouse",
			"image":     map[string]any{"bytesBase64Encoded": b64, "mimeType": "image/png"},
			"lastFrame": map[string]any{"bytesBase64Encoded": b64, "mimeType": "image/png"}}},
		"parameters": map[string]any{"aspectRatio": "16:9", "durationSeconds": float64(6), "resolution": "720p",
			"personGeneration": "allow_adult", "sampleCount": float64(1)}}))

	c.Elapsed = time.Second
	_, err = p.Poll(ctx, c, s.ID)
	ue := asError(t, err)
	g.Expect(ue.Class).To(Equal(upstream.Transient))
	g.Expect(ue.RetryAfter).To(Equal(3*time.Second), "RetryInfo's retryDelay")

	st, err := p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Running))
	g.Expect(st.Progress).To(BeZero(), "operations report no progress")

	st, err = p.Poll(ctx, c, s.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(upstream.Succeeded))
	g.Expect(st.VideoSeconds).To(Equal(int64(6)))
	g.Expect(st.Outputs).To(Equal([]upstream.Output{{Data: mp4, ContentType: "video/mp4"}}))
	last := f.Requests()[len(f.Requests())-1]
	g.Expect(last.Path).To(HavePrefix("/v1beta/files/"))
	g.Expect(last.Header.Get("x-goog-api-key")).To(Equal(f.Key()), "the download needs the key")
}

func TestVeoMapping(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	refs, _ := refServer(t)
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	ctx := context.Background()
	for _, tc := range []struct {
		request string
		secs    float64
	}{
		{`{"prompt":"x","duration":5,"ratio":"adaptive","resolution":"1080p"}`, 8},
		{`{"prompt":"x","duration":-1,"resolution":"720p"}`, 8},
		{`{"prompt":"x","duration":4,"resolution":"720p"}`, 4},
		{`{"prompt":"x","duration":4,"resolution":"720p","reference_images":["` + refs.URL + `/r.png"]}`, 8},
	} {
		_, err := p.Submit(ctx, mediaCall(f, upstream.Video, "veo-3.1-generate-preview", tc.request))
		g.Expect(err).NotTo(HaveOccurred(), tc.request)
		params := f.Requests()[len(f.Requests())-1].JSON()["parameters"].(map[string]any)
		g.Expect(params["durationSeconds"]).To(Equal(tc.secs), tc.request)
	}
	before := len(f.Requests())
	for _, req := range []string{
		`{"prompt":"x","duration":10}`,
		`{"prompt":"x","ratio":"1:1"}`,
		`{"prompt":"x","resolution":"480p"}`,
		`{"prompt":"x","video_list":[{"video_url":"https://v.example/a.mp4"}]}`,
		`{"prompt":"x","reference_images":["a","b","c","d"]}`,
	} {
		_, err := p.Submit(ctx, mediaCall(f, upstream.Video, "veo-3.1-generate-preview", req))
		g.Expect(asError(t, err).Class).To(Equal(upstream.Failover), req)
	}
	g.Expect(f.Requests()).To(HaveLen(before), "nothing was sent")
}

func TestVeoFailures(t *testing.T) {
	g := NewWithT(t)
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	p := gemini.New(fakeupstream.Client(), loopbackDownloads())
	ctx := context.Background()
	c := mediaCall(f, upstream.Video, "veo-3.1-fast-generate-preview", `{"prompt":"x","duration":8}`)
	run := func(plan fakeupstream.VeoPlan) upstream.Status {
		f.SetVideoPlan(plan)
		s, err := p.Submit(ctx, c)
		g.Expect(err).NotTo(HaveOccurred())
		st, err := p.Poll(ctx, c, s.ID)
		g.Expect(err).NotTo(HaveOccurred())
		return st
	}
	st := run(fakeupstream.VeoPlan{Filtered: []string{"The video could not be generated because it violates the safety policy."}})
	g.Expect(st.State).To(Equal(upstream.Failed))
	g.Expect(st.ErrorCode).To(Equal(upstream.CodePolicy))
	g.Expect(st.ErrorMessage).To(ContainSubstring("violates the safety policy"))

	st = run(fakeupstream.VeoPlan{FailCode: 13, FailMessage: "Internal error encountered."})
	g.Expect(st.State).To(Equal(upstream.Failed))
	g.Expect(st.ErrorCode).To(BeEmpty())
	g.Expect(st.ErrorMessage).To(Equal("Internal error encountered."))

	st = run(fakeupstream.VeoPlan{FailCode: 3, FailMessage: "The prompt was blocked by our safety filters."})
	g.Expect(st.ErrorCode).To(Equal(upstream.CodePolicy))

	_, err := p.Poll(ctx, c, "../../secrets")
	g.Expect(asError(t, err).Class).To(Equal(upstream.Permanent))
	_, err = p.Poll(ctx, c, "models/veo-3.1-fast-generate-preview/operations/unknown")
	g.Expect(asError(t, err).Class).To(Equal(upstream.Permanent), "404: the operation is gone")

	_, isCanceler := any(p).(upstream.Canceler)
	g.Expect(isCanceler).To(BeFalse(), "the Gemini API cannot cancel a Veo operation")
}
