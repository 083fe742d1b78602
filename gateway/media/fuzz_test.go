package media

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

var fuzzProfiles = []v1alpha1.ValidationProfile{
	v1alpha1.ProfileMultiImage,
	v1alpha1.ProfileSingleImage,
	v1alpha1.ProfileImageEdit,
	v1alpha1.ProfileAllInOneVideo,
	"unknown",
}

// FuzzValidate checks that Validate never panics and always returns exactly
// one of a result or an error, with a well-formed error or a marshalable
// request. Run with: go test ./gateway/media -run '^$' -fuzz FuzzValidate
func FuzzValidate(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"prompt":"p"}`,
		`{"prompt":"p","n":4,"image_urls":["https://a.example/1.png"],"size":"auto","metadata":{"resolution":"4K","optimize_prompt_options":{"mode":"fast"},"sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":5},"watermark":false}}`,
		`{"prompt":"p","n":"2"}`,
		`{"prompt":"p","n":1e400}`,
		`{"prompt":"p","size":"1024*1024","resolution":"2K","metadata":{"prompt_extend":false,"prompt_extend_mode":"agent","negative_prompt":"x","seed":9223372036854775807,"watermark":true},"client_business_id":"b"}`,
		`{"prompt":"p","size":"99999999x1"}`,
		`{"prompt":"p","size":"match_input_image","image_urls":["https://a.example/x.png"],"metadata":{"response_format":"jpg","safety_tolerance":6,"prompt_upsampling":true}}`,
		`{"prompt":"p","duration":-1,"aspect_ratio":"16:9","resolution":"720p","audio":false,"watermark":true,"seed":1}`,
		`{"image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/l.png","role":"last_frame"}],"private_asset_review":true}`,
		`{"prompt":"p","reference_images":["https://a.example/1.png"],"video_list":[{"video_url":"https://v.example/1.mp4","duration":5}],"audio_with_roles":[{"url":"https://s.example/1.mp3","role":"reference_audio","duration":3}],"metadata":{"media":[{"type":"link","url":"https://example.com"}]},"private_asset_review":true,"client_business_id":"x"}`,
		`{"prompt":"p","image_with_roles":[{"url":"asset://x","role":"first_frame"}],"private_asset_review":true}`,
		`{"prompt":"p","private_assets":true}`,
		`{"prompt":"p","image":"https://a.example/1.png","images":["https://a.example/2.png"]}`,
		`{"prompt":"p","image_with_roles":[{"url":"https://a.example/1.png","role":"reference_image"}],"reference_images":["https://a.example/2.png"],"video_with_roles":[{"url":"https://v.example/1.mp4","role":"reference_video","duration":3}],"video_list":[{"video_url":"https://v.example/2.mp4"}],"private_asset_review":true}`,
		`{"image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/r.png","role":"reference_image"}],"video_with_roles":[{"url":"https://a.example/f.png","role":"x"}]}`,
		`{"prompt":"p","image_urls":["data:image/png;base64,AAAA"]}`,
		`{"prompt":"p","video_list":[{"video_url":"https://u:p@v.example/1.mp4","duration":1e308},{"video_url":"https://v.example/1.mp4","duration":1e308}]}`,
		`{"prompt":"p","metadata":{"media":[{"type":"file","url":"https://f.example/a"},{"type":"link","url":"https://f.example/a"}]}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s), i%2 == 0)
	}
	probe := func(_ context.Context, url string) (int, int, string, int64, error) {
		switch len(url) % 4 {
		case 0:
			return 100, 100, "png", 1000, nil
		case 1:
			return 10, 5000, "jpeg", 1 << 30, nil
		case 2:
			return 0, 0, "", 0, errors.New("unreachable")
		default:
			return -1, -1, "gif", -1, nil
		}
	}
	f.Fuzz(func(t *testing.T, p uint8, body []byte, review bool) {
		profile := fuzzProfiles[int(p)%len(fuzzProfiles)]
		opts := Options{PrivateAssetReviewEnabled: review}
		if p&0x80 != 0 {
			opts.ImageProbe = probe
		}
		n, err := Validate(profile, body, opts)
		if (n == nil) == (err == nil) {
			t.Fatalf("want exactly one of result and error, got %v and %v", n, err)
		}
		if err != nil {
			if err.Message == "" || err.Type == "" {
				t.Fatalf("malformed error %#v", err)
			}
			if err.Status != http.StatusBadRequest && err.Status != http.StatusInternalServerError {
				t.Fatalf("unexpected status %d", err.Status)
			}
			return
		}
		raw, jerr := n.RequestJSON()
		if jerr != nil {
			t.Fatalf("normalized request does not marshal: %v", jerr)
		}
		// The normalized request is itself accepted, with the same facts.
		n2, err2 := Validate(profile, raw, opts)
		if err2 != nil {
			t.Fatalf("normalized request %s rejected: %v", raw, err2)
		}
		if n2.N != n.N || n2.ReferenceImages != n.ReferenceImages || n2.Duration != n.Duration ||
			n2.Resolution != n.Resolution || n2.Size != n.Size || n2.ClientBusinessID != n.ClientBusinessID ||
			len(n2.ReviewAssets) != len(n.ReviewAssets) {
			a, _ := json.Marshal(n)
			b, _ := json.Marshal(n2)
			t.Fatalf("normalization is not idempotent:\n%s\n%s", a, b)
		}
	})
}
