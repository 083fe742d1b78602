package fakeupstream_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/modelgate/modelgate/test/fakeupstream"
)

// The Azure fake against openai-go's own Azure support: deployment URL,
// api-version, api-key, and the answers' Azure additions.
func TestAzureFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewAzureOpenAI()
	defer f.Close()
	f.SetDeployments("my-gpt")
	c := openai.NewClient(azure.WithEndpoint(f.URL, "2024-10-21"), azure.WithAPIKey(f.Key()), azure.WithUnsafeAllowHTTP(),
		ooption.WithHTTPClient(fakeupstream.Client()), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "my-gpt", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	f.Enqueue(fakeupstream.Reply{Text: "Hello from Azure", Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 4}})
	r, err := c.Chat.Completions.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Choices[0].Message.Content).To(Equal("Hello from Azure"))
	g.Expect(r.Model).To(Equal(fakeupstream.AzureModel))
	g.Expect(r.Usage.PromptTokens).To(Equal(int64(9)))
	g.Expect(r.JSON.ExtraFields).To(HaveKey("prompt_filter_results"))
	last := f.Last()
	g.Expect(last.Path).To(Equal("/openai/deployments/my-gpt/chat/completions"))
	g.Expect(last.Query).To(Equal("api-version=2024-10-21"))
	g.Expect(last.Header.Get("api-key")).To(Equal(f.Key()))

	f.Enqueue(fakeupstream.Reply{Text: "Streamed from Azure", Usage: fakeupstream.Usage{InputTokens: 9, OutputTokens: 4}})
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	g.Expect(acc.Choices[0].Message.Content).To(Equal("Streamed from Azure"))
	g.Expect(acc.Usage.CompletionTokens).To(Equal(int64(4)))

	params.Model, params.StreamOptions = "other", openai.ChatCompletionStreamOptionsParam{}
	_, err = c.Chat.Completions.New(ctx, params)
	var oerr *openai.Error
	g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
	g.Expect(oerr.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(oerr.Code).To(Equal("DeploymentNotFound"))

	bad := openai.NewClient(azure.WithEndpoint(f.URL, "2024-10-21"), azure.WithAPIKey("wrong"), azure.WithUnsafeAllowHTTP(),
		ooption.WithHTTPClient(fakeupstream.Client()), ooption.WithMaxRetries(0))
	params.Model = "my-gpt"
	_, err = bad.Chat.Completions.New(ctx, params)
	g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
	g.Expect(oerr.StatusCode).To(Equal(http.StatusUnauthorized))
}

// The Videos fake against openai-go's video service: multipart create with
// a file reference, retrieve, download, delete. The SDK marks the service
// deprecated (OpenAI shuts the API down on 2026-09-24); until then it is
// the reference for the wire format.
//
//nolint:staticcheck // SA1019: see above
func TestOpenAIVideosFakeWithTheOfficialSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fakeupstream.NewOpenAIVideos()
	defer f.Close()
	mp4 := []byte("\x00\x00\x00\x18ftypmp42 sdk clip")
	f.SetPlan(fakeupstream.VideoPlan{Polls: 1, Output: mp4})
	c := openai.NewClient(ooption.WithBaseURL(f.URL+"/v1"), ooption.WithAPIKey(f.Key()), ooption.WithMaxRetries(0))

	v, err := c.Videos.New(ctx, openai.VideoNewParams{Prompt: "a lighthouse", Model: openai.VideoModelSora2,
		Seconds: openai.VideoSeconds8, Size: openai.VideoSize1280x720,
		InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: openai.File(bytes.NewReader([]byte("png")), "first.png", "image/png")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Status).To(Equal(openai.VideoStatusQueued))
	g.Expect(v.Seconds).To(Equal(openai.VideoSeconds8))
	g.Expect(f.Requests()[0].Header.Get("Content-Type")).To(HavePrefix("multipart/form-data"))

	v, err = c.Videos.Get(ctx, v.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Status).To(Equal(openai.VideoStatusQueued))
	v, err = c.Videos.Get(ctx, v.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Status).To(Equal(openai.VideoStatusCompleted))
	g.Expect(v.Progress).To(Equal(int64(100)))

	resp, err := c.Videos.DownloadContent(ctx, v.ID, openai.VideoDownloadContentParams{})
	g.Expect(err).NotTo(HaveOccurred())
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(data).To(Equal(mp4))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("video/mp4"))

	d, err := c.Videos.Delete(ctx, v.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Deleted).To(BeTrue())
	_, err = c.Videos.Get(ctx, v.ID)
	var oerr *openai.Error
	g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
	g.Expect(oerr.StatusCode).To(Equal(http.StatusNotFound))

	_, err = c.Videos.New(ctx, openai.VideoNewParams{Prompt: "x", Size: openai.VideoSize1792x1024})
	g.Expect(errors.As(err, &oerr)).To(BeTrue(), "%v", err)
	g.Expect(oerr.StatusCode).To(Equal(http.StatusBadRequest))
	g.Expect(oerr.Param).To(Equal("size"), "1792x1024 is sora-2-pro's only")
}
