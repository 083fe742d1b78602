package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/openai"
	"github.com/modelgate/modelgate/test/fakeupstream"
)

func call(f *fakeupstream.OpenAIImages, model, request string, opts map[string]string) upstream.Call {
	return upstream.Call{
		Backend: upstream.Backend{Name: "oa", Provider: openai.Name, BaseURL: f.URL + "/v1", APIKey: f.Key(),
			UpstreamModel: model, Options: opts},
		Kind: upstream.Image, TaskID: "task_1", Request: json.RawMessage(request),
	}
}

func classOf(t *testing.T, err error) *upstream.Error {
	t.Helper()
	var ue *upstream.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v is not an *upstream.Error", err)
	}
	return ue
}

func TestGPTImageAnswersBase64Bytes(t *testing.T) {
	f := fakeupstream.NewOpenAIImages()
	defer f.Close()
	s, err := openai.New(fakeupstream.Client()).Submit(context.Background(),
		call(f, "gpt-image-1", `{"model":"brand-4-0","prompt":"two lamps","n":2,"size":"16:9","metadata":{"watermark":true}}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Final == nil || s.Final.State != upstream.Succeeded || len(s.Final.Outputs) != 2 {
		t.Fatalf("submission %+v", s)
	}
	for i, o := range s.Final.Outputs {
		if o.URL != "" || !bytes.Equal(o.Data, f.Image(i)) || o.ContentType != "image/png" {
			t.Fatalf("output %d: url %q, %d bytes, %q", i, o.URL, len(o.Data), o.ContentType)
		}
	}
	if u := s.Final.Usage; u == nil || u.InputTokens != 10 || u.OutputTokens != 2112 || u.TotalTokens != 2122 {
		t.Fatalf("usage %+v, want the answer's 10 in and 2 112 out", u)
	}
	req := f.Requests()[0]
	var body map[string]any
	_ = json.Unmarshal(req.Body, &body)
	want := map[string]any{"model": "gpt-image-1", "prompt": "two lamps", "n": float64(2), "size": "1536x1024"}
	if len(body) != len(want) {
		t.Fatalf("body %v, want exactly %v", body, want)
	}
	for k, v := range want {
		if body[k] != v {
			t.Fatalf("body %v, want %v", body, want)
		}
	}
	if req.Path != "/v1/images/generations" || req.Header.Get("Authorization") != "Bearer "+f.Key() {
		t.Fatalf("request %s %v", req.Path, req.Header)
	}
}

func TestDallEAnswersURLs(t *testing.T) {
	f := fakeupstream.NewOpenAIImages()
	defer f.Close()
	s, err := openai.New(fakeupstream.Client()).Submit(context.Background(),
		call(f, "dall-e-2", `{"model":"m","prompt":"a fox"}`, map[string]string{"size": "512x512"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Final.Outputs) != 1 || s.Final.Outputs[0].URL == "" {
		t.Fatalf("outputs %+v", s.Final.Outputs)
	}
	resp, err := fakeupstream.Client().Get(s.Final.Outputs[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, f.Image(0)) {
		t.Fatal("the URL does not serve the image")
	}

	// b64_json on request, through the backend option.
	s, err = openai.New(fakeupstream.Client()).Submit(context.Background(),
		call(f, "dall-e-3", `{"model":"m","prompt":"a fox","size":"9:16"}`,
			map[string]string{"responseFormat": "b64_json", "portraitSize": "1024x1792"}))
	if err != nil {
		t.Fatal(err)
	}
	if o := s.Final.Outputs[0]; !bytes.Equal(o.Data, f.Image(0)) {
		t.Fatalf("b64 output %+v", o)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	f := fakeupstream.NewOpenAIImages()
	defer f.Close()
	a := openai.New(fakeupstream.Client())
	c := call(f, "gpt-image-1", `{"model":"m","prompt":"p"}`, nil)

	f.Fail(fakeupstream.ImageFailure{Status: 500, Message: "The server had an error while processing your request."})
	_, err := a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Failover || !ue.Retryable {
		t.Fatalf("500: %+v", ue)
	}

	f.Fail(fakeupstream.ImageFailure{Status: 429, Message: "Rate limit reached", RetryAfter: "12"})
	_, err = a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Failover || ue.RetryAfter != 12*time.Second {
		t.Fatalf("429: %+v", ue)
	}

	f.Fail(fakeupstream.ImageFailure{Status: 400, Code: "content_policy_violation",
		Message: "Your request was rejected as a result of our safety system."})
	_, err = a.Submit(context.Background(), c)
	if ue := classOf(t, err); ue.Class != upstream.Permanent || ue.Message != "Your request was rejected as a result of our safety system." {
		t.Fatalf("400: %+v", ue)
	}

	// The fake's own validation: a size the model does not have.
	_, err = a.Submit(context.Background(), call(f, "dall-e-2", `{"model":"m","prompt":"p","size":"16:9"}`, nil))
	if ue := classOf(t, err); ue.Class != upstream.Permanent || ue.Status != 400 {
		t.Fatalf("size: %+v", ue)
	}

	// What this adapter cannot do moves the task elsewhere.
	_, err = a.Submit(context.Background(), call(f, "gpt-image-1", `{"model":"m","prompt":"p","image_urls":["https://x/a.png"]}`, nil))
	if ue := classOf(t, err); ue.Class != upstream.Failover || ue.Retryable {
		t.Fatalf("image_urls: %+v", ue)
	}
	// Video tasks go to the Videos API (videos_test.go), which this
	// images-only fake does not serve.
	v := c
	v.Kind = upstream.Video
	_, _ = a.Submit(context.Background(), v)
	if last := f.Requests()[len(f.Requests())-1]; last.Path != "/v1/videos" {
		t.Fatalf("video submitted to %s", last.Path)
	}
	if _, err := a.Poll(context.Background(), c, "x"); classOf(t, err).Class != upstream.Permanent {
		t.Fatal("poll of a synchronous API")
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[string]string{
		"": "1024x1024", "1:1": "1024x1024", "16:9": "1536x1024", "21:9": "1536x1024", "9:16": "1024x1536",
		"3:4": "1024x1536", "auto": "auto", "1280x720": "1280x720", "1280*720": "1280x720", "nonsense": "1024x1024",
	} {
		if got := openai.Size(in, nil); got != want {
			t.Errorf("Size(%q) = %q, want %q", in, got, want)
		}
	}
	if got := openai.Size("16:9", map[string]string{"landscapeSize": "1792x1024"}); got != "1792x1024" {
		t.Errorf("landscapeSize option: %q", got)
	}
	if got := openai.Size("16:9", map[string]string{"size": "1024x1024"}); got != "1024x1024" {
		t.Errorf("size option: %q", got)
	}
}
