package fakeupstream_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/genai"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

func genaiClient(t *testing.T, f *fakeupstream.GeminiMedia, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPClient: fakeupstream.Client(), HTTPOptions: genai.HTTPOptions{BaseURL: f.URL + "/", APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The media fake against Google's own Go SDK: image output of
// generateContent (the thought draft, the image, the per-modality usage),
// a refused prompt, and a Veo operation from predictLongRunning through
// polling to the download of its video, and a filtered one.
func TestGeminiMediaFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewGeminiMedia()
	defer f.Close()
	c := genaiClient(t, f, f.Key())

	r, err := c.Models.GenerateContent(ctx, "gemini-3-pro-image-preview", genai.Text("a red fox"),
		&genai.GenerateContentConfig{ResponseModalities: []string{"TEXT", "IMAGE"},
			ImageConfig: &genai.ImageConfig{AspectRatio: "16:9", ImageSize: "2K"}})
	g.Expect(err).NotTo(HaveOccurred())
	parts := r.Candidates[0].Content.Parts
	g.Expect(parts).To(HaveLen(3))
	g.Expect(parts[0].Thought).To(BeTrue())
	g.Expect(parts[1].Text).NotTo(BeEmpty())
	want, _ := fakeupstream.DefaultOutput("image", 0)
	g.Expect(parts[2].InlineData.Data).To(Equal(want))
	g.Expect(parts[2].InlineData.MIMEType).To(Equal("image/png"))
	g.Expect(r.Candidates[0].FinishReason).To(Equal(genai.FinishReasonStop))
	u := r.UsageMetadata
	g.Expect(u.PromptTokenCount).To(Equal(int32(3)), "9 bytes of prompt")
	g.Expect(u.CandidatesTokenCount).To(Equal(int32(8 + fakeupstream.GeminiProImageTokens)))
	g.Expect(u.ThoughtsTokenCount).To(Equal(int32(fakeupstream.GeminiProThoughtTokens)))
	g.Expect(u.TotalTokenCount).To(Equal(u.PromptTokenCount + u.CandidatesTokenCount + u.ThoughtsTokenCount))
	g.Expect(u.CandidatesTokensDetails).To(ContainElement(&genai.ModalityTokenCount{Modality: genai.MediaModalityImage, TokenCount: fakeupstream.GeminiProImageTokens}))
	sent := f.Requests()[0]
	g.Expect(sent.Header.Get("x-goog-api-key")).To(Equal(f.Key()))

	f.SetImagePlan(fakeupstream.GeminiImagePlan{BlockReason: "PROHIBITED_CONTENT"})
	r, err = c.Models.GenerateContent(ctx, "gemini-2.5-flash-image", genai.Text("no"),
		&genai.GenerateContentConfig{ResponseModalities: []string{"IMAGE"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Candidates).To(BeEmpty())
	g.Expect(r.PromptFeedback.BlockReason).To(Equal(genai.BlockedReasonProhibitedContent))

	mp4 := []byte("\x00\x00\x00\x18ftypmp42 sdk veo")
	f.SetVideoPlan(fakeupstream.VeoPlan{Polls: 1, Output: mp4})
	secs := int32(8)
	op, err := c.Models.GenerateVideos(ctx, "veo-3.1-generate-preview", "a lighthouse",
		&genai.Image{ImageBytes: want, MIMEType: "image/png"},
		&genai.GenerateVideosConfig{AspectRatio: "16:9", DurationSeconds: &secs, Resolution: "1080p", NumberOfVideos: 1, PersonGeneration: "allow_adult"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.Done).To(BeFalse())
	op, err = c.Operations.GetVideosOperation(ctx, op, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.Done).To(BeFalse())
	op, err = c.Operations.GetVideosOperation(ctx, op, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.Done).To(BeTrue())
	g.Expect(op.Response.GeneratedVideos).To(HaveLen(1))
	data, err := c.Files.Download(ctx, genai.NewDownloadURIFromGeneratedVideo(op.Response.GeneratedVideos[0]), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(Equal(mp4))

	f.SetVideoPlan(fakeupstream.VeoPlan{Filtered: []string{"violates the safety policy"}})
	op, err = c.Models.GenerateVideos(ctx, "veo-3.1-generate-preview", "x", nil, &genai.GenerateVideosConfig{DurationSeconds: &secs})
	g.Expect(err).NotTo(HaveOccurred())
	op, err = c.Operations.GetVideosOperation(ctx, op, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op.Response.RAIMediaFilteredCount).To(Equal(int32(1)))
	g.Expect(op.Response.RAIMediaFilteredReasons).To(Equal([]string{"violates the safety policy"}))

	short := int32(5)
	_, err = c.Models.GenerateVideos(ctx, "veo-3.1-generate-preview", "x", nil, &genai.GenerateVideosConfig{DurationSeconds: &short})
	var apiErr genai.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.Code).To(Equal(http.StatusBadRequest))
	g.Expect(apiErr.Status).To(Equal("INVALID_ARGUMENT"))

	_, err = genaiClient(t, f, "wrong").Models.GenerateContent(ctx, "gemini-2.5-flash-image", genai.Text("x"), nil)
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.Message).To(HavePrefix("API key not valid"))
}
