package generationtask

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/tasks"
)

func reviewedTask(outcome string, assets ...v1.ReviewAsset) *v1.GenerationTask {
	t := &v1.GenerationTask{}
	t.Status.ReviewRounds = []v1.ReviewRound{{Round: 1, Backend: "b", Outcome: outcome, Assets: assets}}
	return t
}

func TestForwardCopiesNamesTheReviewedCopy(t *testing.T) {
	req := []byte(`{"prompt":"https://cdn.example/v.mp4","seed":12345678901234567,` +
		`"video_with_roles":[{"url":"https://cdn.example/v.mp4","role":"reference_video","duration":2}],` +
		`"reference_images":["https://cdn.example/a.png","blob:tenants/t/inline.png"]}`)
	task := reviewedTask(v1.ReviewPassed,
		v1.ReviewAsset{URL: "https://cdn.example/v.mp4", Type: "video", State: v1.ReviewPassed, Copy: "tenants/t/review-assets/video-1.mp4"},
		v1.ReviewAsset{URL: "https://cdn.example/a.png", Type: "image", State: v1.ReviewPassed, Copy: "tenants/t/review-assets/image-2.png"},
		v1.ReviewAsset{URL: "sha256:00", Type: "image", State: v1.ReviewPassed, Copy: "tenants/t/inline.png"})
	out, err := forwardCopies(req, task)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Prompt string           `json:"prompt"`
		Seed   json.Number      `json:"seed"`
		Videos []map[string]any `json:"video_with_roles"`
		Images []string         `json:"reference_images"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Videos[0]["url"] != tasks.BlobScheme+"tenants/t/review-assets/video-1.mp4" {
		t.Errorf("video url = %v, want the reviewed copy", got.Videos[0]["url"])
	}
	if got.Images[0] != tasks.BlobScheme+"tenants/t/review-assets/image-2.png" || got.Images[1] != "blob:tenants/t/inline.png" {
		t.Errorf("images = %v", got.Images)
	}
	if got.Prompt != "https://cdn.example/v.mp4" || got.Seed != "12345678901234567" {
		t.Errorf("prompt %q or seed %s changed", got.Prompt, got.Seed)
	}

	same, err := forwardCopies(req, reviewedTask(v1.ReviewPending, task.Status.ReviewRounds[0].Assets...))
	if err != nil || string(same) != string(req) {
		t.Errorf("a round that has not passed must leave the request alone: %s, %v", same, err)
	}
}

// TestForwardCopiesNamesTheLibraryReference: an asset the channel's
// library keeps is sent as its reference, in place of the tenant's URL or
// the inline image's stored blob; assets without one keep their copies.
func TestForwardCopiesNamesTheLibraryReference(t *testing.T) {
	req := []byte(`{"prompt":"asset://nothing","video_with_roles":[{"url":"https://cdn.example/v.mp4","role":"reference_video"}],` +
		`"reference_images":["https://cdn.example/a.png","blob:tenants/t/inline.png"],` +
		`"audio_with_roles":[{"url":"https://cdn.example/a.mp3","role":"reference_audio"}]}`)
	task := reviewedTask(v1.ReviewPassed,
		v1.ReviewAsset{URL: "https://cdn.example/v.mp4", Type: "video", State: v1.ReviewPassed, Copy: "tenants/t/review-assets/v.mp4", UpstreamRef: "asset://asset-v"},
		v1.ReviewAsset{URL: "https://cdn.example/a.png", Type: "image", State: v1.ReviewPassed, Copy: "tenants/t/review-assets/a.png"},
		v1.ReviewAsset{URL: "sha256:00", Type: "image", State: v1.ReviewPassed, Copy: "tenants/t/inline.png", UpstreamRef: "asset://asset-i"},
		v1.ReviewAsset{URL: "https://cdn.example/a.mp3", Type: "audio", State: v1.ReviewPassed, Copy: "tenants/t/review-assets/a.mp3", UpstreamRef: "asset://asset-a"})
	out, err := forwardCopies(req, task)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"prompt": "asset://nothing",
		"video_with_roles": []any{map[string]any{"url": "asset://asset-v", "role": "reference_video"}},
		"reference_images": []any{tasks.BlobScheme + "tenants/t/review-assets/a.png", "asset://asset-i"},
		"audio_with_roles": []any{map[string]any{"url": "asset://asset-a", "role": "reference_audio"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forwarded request (-want +got):\n%s", diff)
	}
}

func TestInputVideoSecondsFollowsProbedCopies(t *testing.T) {
	sub := &tasks.Submission{InputVideoSeconds: 12, ListVideoMillis: 2000}
	video := func(ms int64) v1.ReviewAsset {
		return v1.ReviewAsset{Type: "video", State: v1.ReviewPassed, Copy: "k", DurationMillis: ms}
	}
	for _, tc := range []struct {
		name string
		task *v1.GenerationTask
		want int64
	}{
		{"no review: the gateway's figure", &v1.GenerationTask{}, 12},
		{"probed copies plus video_list, rounded up", reviewedTask(v1.ReviewPassed, video(3200), video(1000)), 7},
		{"a video not probed yet: the gateway's figure", reviewedTask(v1.ReviewPassed, video(3200), video(0)), 12},
		{"no reviewed video: the gateway's figure", reviewedTask(v1.ReviewPassed, v1.ReviewAsset{Type: "image"}), 12},
		{"round not passed", reviewedTask(v1.ReviewPending, video(3000)), 12},
	} {
		if got := inputVideoSeconds(tc.task, sub); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
