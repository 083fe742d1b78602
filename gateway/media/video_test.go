package media

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

const video = v1alpha1.ProfileAllInOneVideo

var reviewOn = Options{PrivateAssetReviewEnabled: true}

func TestVideoDefaults(t *testing.T) {
	g := NewWithT(t)
	n, req := accept(t, video, `{"model":"a-video","prompt":"a wave"}`, Options{})
	g.Expect(req).To(Equal(map[string]any{
		"model":                "a-video",
		"prompt":               "a wave",
		"duration":             float64(5),
		"ratio":                "adaptive",
		"resolution":           "1080p",
		"audio":                true,
		"watermark":            false,
		"private_asset_review": false,
	}))
	g.Expect(n.N).To(Equal(1))
	g.Expect(n.MaxOutputs).To(Equal(1))
	g.Expect(n.Duration).To(Equal(5))
	g.Expect(n.Resolution).To(Equal("1080p"))
	g.Expect(n.Size).To(Equal("adaptive"))
	g.Expect(n.Width).To(BeZero())
	g.Expect(n.Audio).To(BeTrue())
	g.Expect(n.HasVideoInput).To(BeFalse())
	g.Expect(n.ReferenceImages).To(BeZero())
	g.Expect(n.PrivateAssetReview).To(BeFalse())
	g.Expect(n.ReviewAssets).To(BeEmpty())
}

func TestVideoAccepted(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		opts  Options
		check func(g Gomega, n *Normalized, req map[string]any)
	}{
		{name: "every scalar field", body: `{"prompt":"p","duration":30,"ratio":"9:16","resolution":"720p","audio":false,"watermark":true,"seed":-1}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req).To(HaveKeyWithValue("duration", float64(30)))
				g.Expect(req).To(HaveKeyWithValue("ratio", "9:16"))
				g.Expect(req).To(HaveKeyWithValue("resolution", "720p"))
				g.Expect(req).To(HaveKeyWithValue("audio", false))
				g.Expect(req).To(HaveKeyWithValue("watermark", true))
				g.Expect(req).To(HaveKeyWithValue("seed", float64(-1)))
				g.Expect([]int{n.Width, n.Height}).To(Equal([]int{720, 1280}))
				g.Expect(n.Audio).To(BeFalse())
			}},
		{name: "duration 2", body: `{"prompt":"p","duration":2}`, check: func(g Gomega, n *Normalized, _ map[string]any) { g.Expect(n.Duration).To(Equal(2)) }},
		{name: "duration -1 lets the model decide", body: `{"prompt":"p","duration":-1}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.Duration).To(Equal(-1))
			g.Expect(req["duration"]).To(Equal(float64(-1)))
		}},
		{name: "aspect_ratio alias is normalized to ratio", body: `{"prompt":"p","aspect_ratio":"4:3","resolution":"480p"}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req).To(HaveKeyWithValue("ratio", "4:3"))
			g.Expect(req).NotTo(HaveKey("aspect_ratio"))
			g.Expect([]int{n.Width, n.Height}).To(Equal([]int{640, 480}))
		}},
		{name: "ratio with null alias", body: `{"prompt":"p","ratio":"1:1","aspect_ratio":null}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.Size).To(Equal("1:1"))
		}},
		{name: "first frame only, no prompt", body: `{"image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}]}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req).NotTo(HaveKey("prompt"))
			g.Expect(req["image_with_roles"]).To(Equal([]any{map[string]any{"url": "https://a.example/f.png", "role": "first_frame"}}))
			g.Expect(n.FrameImages).To(Equal(1))
		}},
		{name: "first and last frame", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/l.png","role":"last_frame"},{"url":"https://a.example/f.png","role":"first_frame"}]}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.FrameImages).To(Equal(2))
		}},
		{name: "10 reference images with 5 reference videos", body: `{"prompt":"p","reference_images":` + urlsJSON(10) + `,"video_list":[{"video_url":"https://v.example/1.mp4"},{"video_url":"https://v.example/2.mp4"},{"video_url":"https://v.example/3.mp4"},{"video_url":"https://v.example/4.mp4"},{"video_url":"https://v.example/5.mp4"}]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(n.ReferenceImages).To(Equal(10))
				g.Expect(n.ReferenceVideos).To(Equal(5))
				g.Expect(n.HasVideoInput).To(BeTrue())
				g.Expect(req["video_list"]).To(HaveLen(5))
			}},
		{name: "images, videos and audio together with durations at 15 s", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"video_list":[{"video_url":"https://v.example/1.mp4","duration":10},{"video_url":"https://v.example/2.mp4","duration":5}],"audio_with_roles":[{"url":"https://s.example/1.mp3","role":"reference_audio","duration":7.5},{"url":"https://s.example/2.mp3","duration":7.5}]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(n.InputVideoSeconds).To(Equal(15.0))
				g.Expect(n.InputAudioSeconds).To(Equal(15.0))
				g.Expect(n.HasAudioInput).To(BeTrue())
				g.Expect(n.ReferenceAudios).To(Equal(2))
				g.Expect(req["audio_with_roles"]).To(Equal([]any{
					map[string]any{"url": "https://s.example/1.mp3", "role": "reference_audio", "duration": 7.5},
					map[string]any{"url": "https://s.example/2.mp3", "role": "reference_audio", "duration": 7.5},
				}))
				g.Expect(req["video_list"]).To(ContainElement(map[string]any{"video_url": "https://v.example/1.mp4", "duration": float64(10)}))
			}},
		{name: "audio only", body: `{"audio_with_roles":[{"url":"https://s.example/1.mp3"}]}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.ReferenceAudios).To(Equal(1))
		}},
		{name: "one file", body: `{"prompt":"p","metadata":{"media":[{"type":"file","url":"https://f.example/doc.pdf"}],"other":1}}`, check: func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"]).To(Equal(map[string]any{"media": []any{map[string]any{"type": "file", "url": "https://f.example/doc.pdf"}}}))
		}},
		{name: "one link with reference images", body: `{"reference_images":["https://a.example/1.png"],"metadata":{"media":[{"type":"link","url":"https://example.com/page"}]}}`, check: func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["metadata"].(map[string]any)["media"]).To(HaveLen(1))
		}},
		{name: "image_urls is taken as reference images", body: `{"prompt":"p","image_urls":["https://a.example/1.png","https://a.example/2.png"]}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/1.png", "https://a.example/2.png"}))
			g.Expect(req).NotTo(HaveKey("image_urls"))
			g.Expect(n.ReferenceImages).To(Equal(2))
		}},
		{name: "image is taken as a reference image", body: `{"prompt":"p","image":"https://a.example/1.png","images":[]}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/1.png"}))
		}},
		{name: "asset references without review", body: `{"prompt":"p","reference_images":["asset://asset-123"]}`, check: func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req["reference_images"]).To(Equal([]any{"asset://asset-123"}))
		}},
		{name: "client_business_id", body: `{"prompt":"p","client_business_id":"order-9"}`, check: func(g Gomega, n *Normalized, req map[string]any) {
			g.Expect(n.ClientBusinessID).To(Equal("order-9"))
			g.Expect(req["client_business_id"]).To(Equal("order-9"))
		}},
		{name: "unknown fields dropped", body: `{"prompt":"p","n":3,"video_urls":["https://v.example/x.mp4"],"extra":{}}`, check: func(g Gomega, _ *Normalized, req map[string]any) {
			g.Expect(req).NotTo(HaveKey("n"))
			g.Expect(req).NotTo(HaveKey("video_urls"))
			g.Expect(req).NotTo(HaveKey("extra"))
		}},
		{name: "video_with_roles is a reference video, forwarded as sent", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"video_with_roles":[{"url":" https://v.example/1.mp4","role":"Reference_Video","duration":4},{"url":"https://v.example/2.mp4"}]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["video_with_roles"]).To(Equal([]any{
					map[string]any{"url": "https://v.example/1.mp4", "role": "reference_video", "duration": float64(4)},
					map[string]any{"url": "https://v.example/2.mp4", "role": "reference_video"},
				}))
				g.Expect(req).NotTo(HaveKey("video_list"))
				g.Expect(n.HasVideoInput).To(BeTrue())
				g.Expect(n.ReferenceVideos).To(Equal(2))
				g.Expect(n.InputVideoSeconds).To(Equal(4.0))
				g.Expect(n.ReferenceImages).To(Equal(1))
			}},
		{name: "video_list and video_with_roles together", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4","duration":5}],"video_with_roles":[{"url":"https://v.example/2.mp4","role":"reference_video","duration":10}]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["video_list"]).To(HaveLen(1))
				g.Expect(req["video_with_roles"]).To(HaveLen(1))
				g.Expect(n.ReferenceVideos).To(Equal(2))
				g.Expect(n.InputVideoSeconds).To(Equal(15.0))
			}},
		{name: "video_with_roles alone, no prompt", body: `{"video_with_roles":[{"url":"https://v.example/1.mp4"}]}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.HasVideoInput).To(BeTrue())
		}},
		{name: "image_with_roles reference images are forwarded as reference_images", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/1.png","role":"reference_image"},{"url":"https://a.example/2.png","role":" REFERENCE_IMAGE "}],"video_list":[{"video_url":"https://v.example/1.mp4"}]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/1.png", "https://a.example/2.png"}))
				g.Expect(req).NotTo(HaveKey("image_with_roles"))
				g.Expect(n.ReferenceImages).To(Equal(2))
				g.Expect(n.FrameImages).To(BeZero())
			}},
		{name: "10 reference_image items", body: `{"prompt":"p","image_with_roles":` + roleItemsJSON(10, "reference_image") + `}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.ReferenceImages).To(Equal(10))
		}},
		// the first nonempty image field is used; the others are ignored
		{name: "reference_images wins over image_urls", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"image_urls":["https://a.example/2.png","https://a.example/3.png"]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/1.png"}))
				g.Expect(req).NotTo(HaveKey("image_urls"))
				g.Expect(n.ReferenceImages).To(Equal(1))
			}},
		{name: "image_urls wins over images and image", body: `{"prompt":"p","reference_images":[],"image_urls":["https://a.example/2.png"],"images":["https://a.example/3.png"],"image":"https://a.example/4.png"}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/2.png"}))
				g.Expect(req).NotTo(HaveKey("images"))
				g.Expect(req).NotTo(HaveKey("image"))
				g.Expect(n.ReferenceImages).To(Equal(1))
			}},
		{name: "image_with_roles reference images win over reference_images", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/1.png","role":"reference_image"}],"reference_images":["https://a.example/2.png","https://a.example/3.png"]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/1.png"}))
				g.Expect(n.ReferenceImages).To(Equal(1))
			}},
		{name: "an empty image_with_roles does not hide reference_images", body: `{"prompt":"p","image_with_roles":[],"reference_images":["https://a.example/2.png"]}`,
			check: func(g Gomega, n *Normalized, req map[string]any) {
				g.Expect(req["reference_images"]).To(Equal([]any{"https://a.example/2.png"}))
				g.Expect(req).NotTo(HaveKey("image_with_roles"))
			}},
		{name: "private_asset_review false without the route switch", body: `{"prompt":"p","private_asset_review":false}`, check: func(g Gomega, n *Normalized, _ map[string]any) {
			g.Expect(n.PrivateAssetReview).To(BeFalse())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, req := accept(t, video, tc.body, tc.opts)
			tc.check(NewWithT(t), n, req)
		})
	}
}

func TestVideoRejected(t *testing.T) {
	five := `{"url":"https://s.example/a.mp3"}`
	cases := append(commonBodyRejects(), []reject{
		{name: "neither prompt nor media", body: `{"duration":5}`, param: "prompt", msg: "prompt is required when the request has no media assets"},
		{name: "blank prompt and no media", body: `{"prompt":"  "}`, param: "prompt", msg: "prompt is required"},
		{name: "prompt not a string", body: `{"prompt":{}}`, param: "prompt", msg: "prompt must be a string"},
		{name: "duration 1", body: `{"prompt":"p","duration":1}`, param: "duration", msg: "duration must be between 2 and 30 seconds, or -1 to let the model decide (got 1)"},
		{name: "duration 31", body: `{"prompt":"p","duration":31}`, param: "duration", msg: "duration must be between 2 and 30 seconds"},
		{name: "duration 0", body: `{"prompt":"p","duration":0}`, param: "duration", msg: "duration must be between 2 and 30"},
		{name: "duration -2", body: `{"prompt":"p","duration":-2}`, param: "duration", msg: "duration must be between 2 and 30"},
		{name: "duration as string", body: `{"prompt":"p","duration":"5"}`, param: "duration", msg: "duration must be a JSON number, not a string"},
		{name: "duration fractional", body: `{"prompt":"p","duration":5.5}`, param: "duration", msg: "duration must be an integer"},
		{name: "ratio and aspect_ratio", body: `{"prompt":"p","ratio":"16:9","aspect_ratio":"16:9"}`, param: "aspect_ratio", msg: "send either ratio or its alias aspect_ratio, not both"},
		{name: "ratio unknown", body: `{"prompt":"p","ratio":"21:9"}`, param: "ratio", msg: "ratio must be one of adaptive, 16:9, 9:16, 1:1, 4:3, 3:4"},
		{name: "aspect_ratio unknown", body: `{"prompt":"p","aspect_ratio":"2:3"}`, param: "aspect_ratio", msg: "aspect_ratio must be one of adaptive"},
		{name: "resolution 4k", body: `{"prompt":"p","resolution":"4k"}`, param: "resolution", msg: "resolution must be one of 480p, 720p, 1080p"},
		{name: "audio as string", body: `{"prompt":"p","audio":"true"}`, param: "audio", msg: "audio must be a boolean"},
		{name: "watermark as number", body: `{"prompt":"p","watermark":0}`, param: "watermark", msg: "watermark must be a boolean"},
		{name: "seed as string", body: `{"prompt":"p","seed":"1"}`, param: "seed", msg: "seed must be a JSON number, not a string"},
		{name: "seed fractional", body: `{"prompt":"p","seed":0.5}`, param: "seed", msg: "seed must be an integer"},
		// frames
		{name: "image_with_roles not an array", body: `{"prompt":"p","image_with_roles":{"url":"https://a.example/f.png"}}`, param: "image_with_roles", msg: "image_with_roles must be an array"},
		{name: "image_with_roles item not an object", body: `{"prompt":"p","image_with_roles":["https://a.example/f.png"]}`, param: "image_with_roles[0]", msg: "image_with_roles[0] must be an object"},
		{name: "frame without url", body: `{"prompt":"p","image_with_roles":[{"role":"first_frame"}]}`, param: "image_with_roles[0].url", msg: "image_with_roles[0].url is required"},
		{name: "frame without role", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png"}]}`, param: "image_with_roles[0].role", msg: "image_with_roles[0].role is required: first_frame, last_frame or reference_image"},
		{name: "frame with unknown role", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"middle"}]}`, param: "image_with_roles[0].role", msg: `image_with_roles[0].role must be one of first_frame, last_frame, reference_image (got "middle")`},
		{name: "image with a video role", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"reference_video"}]}`, param: "image_with_roles[0].role", msg: "must be one of first_frame, last_frame, reference_image"},
		{name: "11 reference_image items", body: `{"prompt":"p","image_with_roles":` + roleItemsJSON(11, "reference_image") + `}`, param: "image_with_roles", msg: "image_with_roles may contain at most 10 reference_image items (got 11)"},
		{name: "last frame with reference images only", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/r.png","role":"reference_image"},{"url":"https://a.example/l.png","role":"last_frame"}]}`, param: "image_with_roles", msg: "last_frame requires a first_frame"},
		{name: "two first frames", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/1.png","role":"first_frame"},{"url":"https://a.example/2.png","role":"first_frame"}]}`, param: "image_with_roles[1].role", msg: "image_with_roles may contain at most one first_frame"},
		{name: "two last frames", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/0.png","role":"first_frame"},{"url":"https://a.example/1.png","role":"last_frame"},{"url":"https://a.example/2.png","role":"last_frame"}]}`, param: "image_with_roles[2].role", msg: "at most one last_frame"},
		{name: "last frame alone", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/l.png","role":"last_frame"}]}`, param: "image_with_roles", msg: "last_frame requires a first_frame"},
		{name: "frame as base64", body: `{"prompt":"p","image_with_roles":[{"url":"data:image/png;base64,AAAA","role":"first_frame"}]}`, param: "image_with_roles[0].url", msg: "upload the file first"},
		{name: "frame as local file", body: `{"prompt":"p","image_with_roles":[{"url":"C:\\img.png","role":"first_frame"}]}`, param: "image_with_roles[0].url", msg: "local files are not accepted"},
		// combination rules
		{name: "frames with reference images", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"reference_images":["https://a.example/r.png"]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with reference videos", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"video_list":[{"video_url":"https://v.example/1.mp4"}]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with reference audio", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/l.png","role":"last_frame"}],"audio_with_roles":[{"url":"https://s.example/a.mp3"}]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with a file", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"metadata":{"media":[{"type":"file","url":"https://f.example/d.pdf"}]}}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with a web link", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"metadata":{"media":[{"type":"link","url":"https://example.com"}]}}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with image_urls", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"image_urls":["https://a.example/r.png"]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with a reference_image item", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/r.png","role":"reference_image"}]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "frames with video_with_roles", body: `{"prompt":"p","image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"}],"video_with_roles":[{"url":"https://v.example/1.mp4","role":"reference_video"}]}`, param: "image_with_roles", msg: MixedFramesMessage},
		{name: "file with web link", body: `{"prompt":"p","metadata":{"media":[{"type":"file","url":"https://f.example/d.pdf"},{"type":"link","url":"https://example.com"}]}}`, param: "metadata.media", msg: "metadata.media cannot combine a file with a web link"},
		{name: "two files", body: `{"prompt":"p","metadata":{"media":[{"type":"file","url":"https://f.example/1.pdf"},{"type":"file","url":"https://f.example/2.pdf"}]}}`, param: "metadata.media", msg: "metadata.media may contain at most one file or one link per request (got 2 items)"},
		{name: "media type unknown", body: `{"prompt":"p","metadata":{"media":[{"type":"video","url":"https://f.example/1.mp4"}]}}`, param: "metadata.media[0].type", msg: "must be one of file, link"},
		{name: "media type missing", body: `{"prompt":"p","metadata":{"media":[{"url":"https://f.example/1.mp4"}]}}`, param: "metadata.media[0].type", msg: "metadata.media[0].type is required: file or link"},
		{name: "media url missing", body: `{"prompt":"p","metadata":{"media":[{"type":"link"}]}}`, param: "metadata.media[0].url", msg: "is required"},
		{name: "media not an array", body: `{"prompt":"p","metadata":{"media":{"type":"link"}}}`, param: "metadata.media", msg: "metadata.media must be an array"},
		// counts and durations
		{name: "11 reference images", body: `{"prompt":"p","reference_images":` + urlsJSON(11) + `}`, param: "reference_images", msg: "reference_images must contain at most 10 image URLs (got 11)"},
		{name: "reference image not http", body: `{"prompt":"p","reference_images":["ftp://a.example/1.png"]}`, param: "reference_images[0]", msg: "must be an http or https URL"},
		{name: "image not a string", body: `{"prompt":"p","image":["https://a.example/1.png"]}`, param: "image", msg: "image must be a string"},
		{name: "6 reference videos", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4"},{"video_url":"https://v.example/2.mp4"},{"video_url":"https://v.example/3.mp4"},{"video_url":"https://v.example/4.mp4"},{"video_url":"https://v.example/5.mp4"},{"video_url":"https://v.example/6.mp4"}]}`, param: "video_list", msg: "video_list must contain at most 5 videos (got 6)"},
		{name: "reference videos over 15 s", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4","duration":10},{"video_url":"https://v.example/2.mp4","duration":5.5}]}`, param: "video_list", msg: "video_list durations must total at most 15 seconds (got 15.5 s)"},
		{name: "video without video_url", body: `{"prompt":"p","video_list":[{"url":"https://v.example/1.mp4"}]}`, param: "video_list[0].video_url", msg: "video_list[0].video_url is required"},
		{name: "video duration as string", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4","duration":"5"}]}`, param: "video_list[0].duration", msg: "video_list[0].duration must be a JSON number, not a string"},
		{name: "video duration zero", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4","duration":0}]}`, param: "video_list[0].duration", msg: "must be a positive number of seconds"},
		{name: "video as base64", body: `{"prompt":"p","video_list":[{"video_url":"data:video/mp4;base64,AAAA"}]}`, param: "video_list[0].video_url", msg: "upload the file first"},
		{name: "6 reference audios", body: `{"prompt":"p","audio_with_roles":[` + strings.Repeat(five+",", 5) + five + `]}`, param: "audio_with_roles", msg: "audio_with_roles must contain at most 5 items (got 6)"},
		{name: "reference audio over 15 s", body: `{"prompt":"p","audio_with_roles":[{"url":"https://s.example/1.mp3","duration":16}]}`, param: "audio_with_roles", msg: "audio_with_roles durations must total at most 15 seconds (got 16 s)"},
		{name: "video_with_roles not an array", body: `{"prompt":"p","video_with_roles":{"url":"https://v.example/1.mp4"}}`, param: "video_with_roles", msg: "video_with_roles must be an array"},
		{name: "video_with_roles item not an object", body: `{"prompt":"p","video_with_roles":["https://v.example/1.mp4"]}`, param: "video_with_roles[0]", msg: "video_with_roles[0] must be an object"},
		{name: "video_with_roles without url", body: `{"prompt":"p","video_with_roles":[{"role":"reference_video"}]}`, param: "video_with_roles[0].url", msg: "video_with_roles[0].url is required"},
		{name: "video_with_roles with another role", body: `{"prompt":"p","video_with_roles":[{"url":"https://v.example/1.mp4","role":"first_frame"}]}`, param: "video_with_roles[0].role", msg: `video_with_roles[0].role must be one of reference_video (got "first_frame")`},
		{name: "video_with_roles role not a string", body: `{"prompt":"p","video_with_roles":[{"url":"https://v.example/1.mp4","role":1}]}`, param: "video_with_roles[0].role", msg: "video_with_roles[0].role must be a string"},
		{name: "video_with_roles as base64", body: `{"prompt":"p","video_with_roles":[{"url":"data:video/mp4;base64,AAAA"}]}`, param: "video_with_roles[0].url", msg: "upload the file first"},
		{name: "6 videos over video_list and video_with_roles", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4"},{"video_url":"https://v.example/2.mp4"},{"video_url":"https://v.example/3.mp4"}],"video_with_roles":[{"url":"https://v.example/4.mp4"},{"url":"https://v.example/5.mp4"},{"url":"https://v.example/6.mp4"}]}`, param: "video_with_roles", msg: "video_list and video_with_roles must contain at most 5 videos (got 6)"},
		{name: "6 video_with_roles", body: `{"prompt":"p","video_with_roles":[{"url":"https://v.example/1.mp4"},{"url":"https://v.example/2.mp4"},{"url":"https://v.example/3.mp4"},{"url":"https://v.example/4.mp4"},{"url":"https://v.example/5.mp4"},{"url":"https://v.example/6.mp4"}]}`, param: "video_with_roles", msg: "video_with_roles must contain at most 5 videos (got 6)"},
		{name: "video durations over 15 s over both fields", body: `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4","duration":8}],"video_with_roles":[{"url":"https://v.example/2.mp4","duration":8}]}`, param: "video_with_roles", msg: "video_list and video_with_roles durations must total at most 15 seconds (got 16 s)"},
		{name: "video_with_roles duration zero", body: `{"prompt":"p","video_with_roles":[{"url":"https://v.example/1.mp4","duration":0}]}`, param: "video_with_roles[0].duration", msg: "must be a positive number of seconds"},
		{name: "a non-selected image field is still validated", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"images":["ftp://a.example/2.png"]}`, param: "images[0]", msg: "must be an http or https URL"},
		{name: "audio with another role", body: `{"prompt":"p","audio_with_roles":[{"url":"https://s.example/1.mp3","role":"background"}]}`, param: "audio_with_roles[0].role", msg: "audio_with_roles[0].role must be one of reference_audio"},
		{name: "audio without url", body: `{"prompt":"p","audio_with_roles":[{"role":"reference_audio"}]}`, param: "audio_with_roles[0].url", msg: "is required"},
		// private assets
		{name: "removed private_assets field", body: `{"prompt":"p","private_assets":true}`, param: "private_assets", msg: "private_assets is no longer accepted; it is replaced by the boolean private_asset_review"},
		{name: "removed private_assets field even when null", body: `{"prompt":"p","private_assets":null}`, param: "private_assets", msg: "replaced by the boolean private_asset_review"},
		{name: "private_asset_review as string", body: `{"prompt":"p","private_asset_review":"true"}`, opts: reviewOn, param: "private_asset_review", msg: "private_asset_review must be a boolean"},
		{name: "review not enabled for the route", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"private_asset_review":true}`, param: "private_asset_review", msg: "private_asset_review is not enabled for this model"},
		{name: "review of a text-only request", body: `{"prompt":"p","private_asset_review":true}`, opts: reviewOn, param: "private_asset_review", msg: "text-only requests are not supported"},
		{name: "review with an asset reference image", body: `{"prompt":"p","reference_images":["https://a.example/1.png","asset://a-1"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[1]", msg: "asset:// references cannot be used when private_asset_review is true"},
		{name: "review with an asset frame", body: `{"image_with_roles":[{"url":" ASSET://a-1","role":"first_frame"}],"private_asset_review":true}`, opts: reviewOn, param: "image_with_roles[0].url", msg: "asset:// references cannot be used"},
		{name: "review with an asset video", body: `{"prompt":"p","video_list":[{"video_url":"asset://v-1"}],"private_asset_review":true}`, opts: reviewOn, param: "video_list[0].video_url", msg: "asset:// references cannot be used"},
		{name: "review with an asset video_with_roles", body: `{"prompt":"p","video_with_roles":[{"url":"asset://v-1"}],"private_asset_review":true}`, opts: reviewOn, param: "video_with_roles[0].url", msg: "asset:// references cannot be used"},
		{name: "review with an asset in a non-selected image field (asset:// refused in every media field)", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"image_urls":["asset://a-1"],"private_asset_review":true}`, opts: reviewOn, param: "image_urls[0]", msg: "asset:// references cannot be used"},
		{name: "review with an asset audio", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"audio_with_roles":[{"url":"asset://s-1"}],"private_asset_review":true}`, opts: reviewOn, param: "audio_with_roles[0].url", msg: "asset:// references cannot be used"},
		{name: "review with an asset file", body: `{"prompt":"p","metadata":{"media":[{"type":"file","url":"asset://f-1"}]},"private_asset_review":true}`, opts: reviewOn, param: "metadata.media[0].url", msg: "asset:// references cannot be used"},
		{name: "review with credentials in a URL", body: `{"prompt":"p","reference_images":["https://user:pw@a.example/1.png"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "must not embed credentials"},
		{name: "review with credentials in an audio URL", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"audio_with_roles":[{"url":"https://user@s.example/1.mp3"}],"private_asset_review":true}`, opts: reviewOn, param: "audio_with_roles[0].url", msg: "must not embed credentials"},
		{name: "review with credentials in a video URL", body: `{"prompt":"p","video_with_roles":[{"url":"https://u:p@v.example/1.mp4"}],"private_asset_review":true}`, opts: reviewOn, param: "video_with_roles[0].url", msg: "must not embed credentials"},
		{name: "review with a URL as image and video", body: `{"prompt":"p","reference_images":["https://a.example/x"],"video_with_roles":[{"url":"https://a.example/x"}],"private_asset_review":true}`, opts: reviewOn, param: "video_with_roles[0].url", msg: "is used as both image and video; the same URL cannot have conflicting types"},
		{name: "review with a URL as video and audio", body: `{"prompt":"p","video_with_roles":[{"url":"https://a.example/x"}],"audio_with_roles":[{"url":"https://a.example/x"}],"private_asset_review":true}`, opts: reviewOn, param: "audio_with_roles[0].url", msg: "is used as both video and audio"},
		{name: "review with a URL of two types", body: `{"prompt":"p","reference_images":["https://a.example/x"],"audio_with_roles":[{"url":" https://a.example/x "}],"private_asset_review":true}`, opts: reviewOn, param: "audio_with_roles[0].url", msg: "is used as both image and audio; the same URL cannot have conflicting types"},
		{name: "review URL over 2048 bytes", body: `{"prompt":"p","reference_images":["https://a.example/` + strings.Repeat("x", 2031) + `"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "at most 2048 bytes (got 2049)"},
		{name: "client_business_id over 128 characters", body: `{"prompt":"p","client_business_id":"` + strings.Repeat("b", 129) + `"}`, param: "client_business_id", msg: "client_business_id must be at most 128 characters"},
	}...)
	runRejects(t, video, cases)
}

func TestVideoPrivateAssetReview(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []ReviewAsset
	}{
		{"frames are selected with their roles", `{"image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/l.png","role":"last_frame"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/f.png", Role: RoleFirstFrame},
			{Type: AssetImage, URL: "https://a.example/l.png", Role: RoleLastFrame},
		}},
		{"reference images and audio; video_list is outside review scope", `{"prompt":"p","reference_images":["https://a.example/1.png"],"video_list":[{"video_url":"https://v.example/1.mp4"}],"audio_with_roles":[{"url":"https://s.example/1.mp3"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
			{Type: AssetAudio, URL: "https://s.example/1.mp3", Role: RoleReferenceAudio},
		}},
		{"repeated URLs of one type are reused", `{"prompt":"p","reference_images":["https://a.example/1.png"," https://a.example/1.png","https://a.example/2.png"],"audio_with_roles":[{"url":"https://s.example/1.mp3"},{"url":"https://s.example/1.mp3"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
			{Type: AssetImage, URL: "https://a.example/2.png", Role: RoleReferenceImage},
			{Type: AssetAudio, URL: "https://s.example/1.mp3", Role: RoleReferenceAudio},
		}},
		{"the same URL as first and last frame is reviewed once", `{"image_with_roles":[{"url":"https://a.example/f.png","role":"first_frame"},{"url":"https://a.example/f.png","role":"last_frame"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/f.png", Role: RoleFirstFrame},
		}},
		{"images field", `{"prompt":"p","images":["https://a.example/1.png"],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
		}},
		{"only a reference video: nothing to review", `{"prompt":"p","video_list":[{"video_url":"https://v.example/1.mp4"}],"private_asset_review":true}`, nil},
		{"video_with_roles is reviewed; images, videos, audio in that order", `{"prompt":"p","audio_with_roles":[{"url":"https://s.example/1.mp3"}],"video_with_roles":[{"url":"https://v.example/1.mp4","role":"reference_video"}],"reference_images":["https://a.example/1.png"],"video_list":[{"video_url":"https://v.example/2.mp4"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
			{Type: AssetVideo, URL: "https://v.example/1.mp4", Role: RoleReferenceVideo},
			{Type: AssetAudio, URL: "https://s.example/1.mp3", Role: RoleReferenceAudio},
		}},
		{"a repeated video URL is reviewed once", `{"prompt":"p","video_with_roles":[{"url":"https://v.example/1.mp4"},{"url":" https://v.example/1.mp4"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetVideo, URL: "https://v.example/1.mp4", Role: RoleReferenceVideo},
		}},
		{"image_with_roles reference images", `{"prompt":"p","image_with_roles":[{"url":"https://a.example/1.png","role":"reference_image"},{"url":"https://a.example/2.png","role":"reference_image"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
			{Type: AssetImage, URL: "https://a.example/2.png", Role: RoleReferenceImage},
		}},
		{"image_with_roles wins over reference_images, which is not reviewed", `{"prompt":"p","reference_images":["https://a.example/2.png"],"image_with_roles":[{"url":"https://a.example/1.png","role":"reference_image"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
		}},
		{"reference_images wins over image_urls and image", `{"prompt":"p","image":"https://a.example/3.png","image_urls":["https://a.example/2.png"],"reference_images":["https://a.example/1.png"],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
		}},
		{"images wins over image", `{"prompt":"p","image":"https://a.example/3.png","images":["https://a.example/2.png"],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/2.png", Role: RoleReferenceImage},
		}},
		{"a non-selected image field may repeat a video URL: it is neither reviewed nor sent", `{"prompt":"p","reference_images":["https://a.example/1.png"],"images":["https://v.example/1.mp4"],"video_with_roles":[{"url":"https://v.example/1.mp4"}],"private_asset_review":true}`, []ReviewAsset{
			{Type: AssetImage, URL: "https://a.example/1.png", Role: RoleReferenceImage},
			{Type: AssetVideo, URL: "https://v.example/1.mp4", Role: RoleReferenceVideo},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, req := accept(t, video, tc.body, reviewOn)
			g.Expect(n.PrivateAssetReview).To(BeTrue())
			g.Expect(req["private_asset_review"]).To(BeTrue())
			if tc.want == nil {
				g.Expect(n.ReviewAssets).To(BeEmpty())
			} else {
				g.Expect(n.ReviewAssets).To(Equal(tc.want))
			}
		})
	}

	// Without review no assets are listed even when the route allows it.
	g := NewWithT(t)
	n, _ := accept(t, video, `{"prompt":"p","reference_images":["https://a.example/1.png"]}`, reviewOn)
	g.Expect(n.PrivateAssetReview).To(BeFalse())
	g.Expect(n.ReviewAssets).To(BeNil())
	// Without review, credentials in URLs are the provider's business.
	_, err := Validate(video, []byte(`{"prompt":"p","reference_images":["https://u:p@a.example/1.png"]}`), Options{})
	g.Expect(err).To(BeNil())
}

func TestSelectImagesOrder(t *testing.T) {
	g := NewWithT(t)
	ref := func(u, role string) mediaRef { return mediaRef{url: u, role: role} }
	withRoles := []mediaRef{ref("f", RoleFirstFrame)}
	images := map[string][]mediaRef{
		"reference_images": {ref("r", RoleReferenceImage)},
		"image_urls":       {ref("u", RoleReferenceImage)},
		"images":           {ref("i", RoleReferenceImage)},
		"image":            {ref("s", RoleReferenceImage)},
	}
	g.Expect(selectImages(withRoles, images)).To(Equal(withRoles))
	g.Expect(selectImages(nil, images)).To(Equal(images["reference_images"]))
	for _, drop := range []string{"reference_images", "image_urls", "images"} {
		next := map[string]string{"reference_images": "image_urls", "image_urls": "images", "images": "image"}[drop]
		want := images[next]
		delete(images, drop)
		g.Expect(selectImages(nil, images)).To(Equal(want), "after dropping %s the next field, %s, is used", drop, next)
	}
	delete(images, "image")
	g.Expect(selectImages(nil, images)).To(BeEmpty())
	g.Expect(imageFields).To(Equal([]string{"image_with_roles", "reference_images", "image_urls", "images", "image"}))
}

func TestVideoPixelSize(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		ratio, res string
		w, h       int
		ok         bool
	}{
		{"16:9", "1080p", 1920, 1080, true}, {"9:16", "1080p", 1080, 1920, true},
		{"16:9", "720p", 1280, 720, true}, {"16:9", "480p", 854, 480, true},
		{"1:1", "720p", 720, 720, true}, {"4:3", "1080p", 1440, 1080, true}, {"3:4", "480p", 480, 640, true},
		{"adaptive", "1080p", 0, 0, false}, {"16:9", "4k", 0, 0, false},
	} {
		w, h, ok := VideoPixelSize(tc.ratio, tc.res)
		g.Expect([]any{w, h, ok}).To(Equal([]any{tc.w, tc.h, tc.ok}), "%s %s", tc.ratio, tc.res)
	}
}

// roleItemsJSON is an image_with_roles array of n items with one role.
func roleItemsJSON(n int, role string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"url":"https://img.example.com/%d.png","role":%q}`, i, role)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// tinyPNG is a real 1×1 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestVideoReviewInlineImages(t *testing.T) {
	raw := tinyPNG(t)
	sum := sha256.Sum256(raw)
	key := "sha256:" + hex.EncodeToString(sum[:])
	b64 := base64.StdEncoding.EncodeToString(raw)

	for _, tc := range []struct{ name, body, role string }{
		{"data URI reference image", `{"prompt":"p","reference_images":["data:image/png;base64,` + b64 + `"],"private_asset_review":true}`, RoleReferenceImage},
		{"raw base64 first frame", `{"image_with_roles":[{"url":"` + b64 + `","role":"first_frame"}],"private_asset_review":true}`, RoleFirstFrame},
		{"data URI reference_image item", `{"image_with_roles":[{"url":"data:image/png;base64,` + b64 + `","role":"reference_image"}],"private_asset_review":true}`, RoleReferenceImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, req := accept(t, video, tc.body, reviewOn)
			g.Expect(n.ReviewAssets).To(HaveLen(1))
			a := n.ReviewAssets[0]
			g.Expect(a.URL).To(Equal(key), "keyed by the digest of the decoded content")
			g.Expect(a.Data).To(Equal(raw))
			g.Expect(a.MimeType).To(Equal("image/png"))
			g.Expect(a.Role).To(Equal(tc.role))
			g.Expect(fmt.Sprint(req)).To(ContainSubstring(key), "the key stands in for the data")
			g.Expect(fmt.Sprint(req)).NotTo(ContainSubstring(b64[:20]))
		})
	}

	// The same content twice, once as a data URI and once raw, is one asset.
	g := NewWithT(t)
	n, _ := accept(t, video, `{"prompt":"p","reference_images":["data:image/png;base64,`+b64+`","`+b64+`"],"private_asset_review":true}`, reviewOn)
	g.Expect(n.ReviewAssets).To(HaveLen(1))

	text := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not an image at all ", 4)))
	runRejects(t, video, []reject{
		{name: "inline data that is not an image", body: `{"prompt":"p","reference_images":["data:image/png;base64,` + text + `"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "is not a PNG, JPEG, WebP, GIF or BMP image"},
		{name: "empty data URI", body: `{"prompt":"p","reference_images":["data:image/png;base64,"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "the inline image is empty"},
		{name: "data URI that is not base64", body: `{"prompt":"p","reference_images":["data:image/png,rawbytes"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "data:image/<type>;base64,<data>"},
		{name: "corrupt base64", body: `{"prompt":"p","reference_images":["data:image/png;base64,!!!!"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "is not valid base64 image data"},
		{name: "inline image over 20 MiB", body: `{"prompt":"p","reference_images":["data:image/png;base64,` + strings.Repeat("A", (20<<20)/3*4+8) + `"],"private_asset_review":true}`, opts: reviewOn, param: "reference_images[0]", msg: "at most 20 MiB"},
		{name: "inline image without review", body: `{"prompt":"p","reference_images":["data:image/png;base64,` + b64 + `"]}`, opts: reviewOn, param: "reference_images[0]", msg: "upload the file first"},
		{name: "inline audio under review", body: `{"prompt":"p","reference_images":["https://a.example/1.png"],"audio_with_roles":[{"url":"data:audio/mp3;base64,AAAA"}],"private_asset_review":true}`, opts: reviewOn, param: "audio_with_roles[0].url", msg: "upload the file first"},
	})
}
