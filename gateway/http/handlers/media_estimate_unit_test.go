package handlers

import (
	"testing"

	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/pricing"
)

// A token-priced video reserves the largest size its request can produce.
func TestMediaEstimateVideoSize(t *testing.T) {
	cases := []struct {
		name string
		n    media.Normalized
		want pricing.MediaRequest
	}{
		{"nominal 720p 9:16", media.Normalized{N: 1, Duration: 5, Resolution: "720p", Width: 720, Height: 1280},
			pricing.MediaRequest{Outputs: 1, DurationSeconds: 5, VideoWidth: 720, VideoHeight: 1280}},
		{"adaptive 1080p: the tier's largest", media.Normalized{N: 1, Duration: 4, Resolution: "1080p"},
			pricing.MediaRequest{Outputs: 1, DurationSeconds: 4, VideoWidth: 1920, VideoHeight: 1080}},
		{"model-decided duration", media.Normalized{N: 1, Duration: media.VideoDurationAuto, Resolution: "480p", InputVideoSeconds: 2.5},
			pricing.MediaRequest{Outputs: 1, DurationSeconds: media.VideoMaxDuration, InputVideoSeconds: 3, VideoWidth: 854, VideoHeight: 480}},
		{"an image has no video size", media.Normalized{N: 2, Resolution: "2K", Width: 2048, Height: 2048},
			pricing.MediaRequest{Outputs: 2}},
	}
	for _, c := range cases {
		if got := mediaEstimate(&c.n); got != c.want {
			t.Errorf("%s: mediaEstimate = %+v, want %+v", c.name, got, c.want)
		}
	}
}
