// Seedance video generation: the content-generation task API.
//
// Submit: POST {base}/api/v3/contents/generations/tasks with {"model",
// "content": [...], "ratio", "duration", "resolution", "seed",
// "watermark", "generate_audio"}. The content items, in this order:
// {"type": "text", "text": prompt}; the frames as {"type": "image_url",
// "image_url": {"url"}, "role": "first_frame" | "last_frame"}; reference
// images with role "reference_image"; reference videos (video_list and
// video_with_roles) as {"type": "video_url", "video_url": {"url"}, "role":
// "reference_video"}; reference audio as {"type": "audio_url",
// "audio_url": {"url"}, "role": "reference_audio"}. The answer is {"id"}.
//
// Poll: GET …/tasks/{id}: queued and running are running (Ark reports no
// progress: queued is 0, running is estimated from the time the task has
// run against the backend option expectedDuration, default 60s, at most
// 95), succeeded carries content.video_url (a signed TOS link the
// controller downloads), duration and usage.completion_tokens /
// total_tokens (token-priced routes settle on them), failed carries
// error.code and error.message, cancelled and expired fail the task.

package ark

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Video defaults.
const (
	// DefaultTaskTimeout bounds one exchange of the task API.
	DefaultTaskTimeout = 60 * time.Second
	// DefaultExpectedDuration is how long a Seedance task is expected to
	// run, for the progress estimate (backend option expectedDuration).
	DefaultExpectedDuration = 60 * time.Second
)

type videoRequest struct {
	Prompt         string `json:"prompt"`
	Duration       *int64 `json:"duration"`
	Ratio          string `json:"ratio"`
	Resolution     string `json:"resolution"`
	Audio          *bool  `json:"audio"`
	Watermark      *bool  `json:"watermark"`
	Seed           *int64 `json:"seed"`
	ImageWithRoles []struct {
		URL  string `json:"url"`
		Role string `json:"role"`
	} `json:"image_with_roles"`
	ReferenceImages []string `json:"reference_images"`
	VideoList       []struct {
		VideoURL string `json:"video_url"`
	} `json:"video_list"`
	VideoWithRoles []struct {
		URL string `json:"url"`
	} `json:"video_with_roles"`
	AudioWithRoles []struct {
		URL string `json:"url"`
	} `json:"audio_with_roles"`
	Metadata struct {
		Media []json.RawMessage `json:"media"`
	} `json:"metadata"`
}

type wireTaskRequest struct {
	Model         string        `json:"model"`
	Content       []ContentItem `json:"content"`
	Ratio         string        `json:"ratio,omitempty"`
	Duration      *int64        `json:"duration,omitempty"`
	Resolution    string        `json:"resolution,omitempty"`
	Seed          *int64        `json:"seed,omitempty"`
	Watermark     *bool         `json:"watermark,omitempty"`
	GenerateAudio *bool         `json:"generate_audio,omitempty"`
}

// ContentItem is one item of a task's content array.
type ContentItem struct {
	Type     string   `json:"type"`
	Text     string   `json:"text,omitempty"`
	ImageURL *URLItem `json:"image_url,omitempty"`
	VideoURL *URLItem `json:"video_url,omitempty"`
	AudioURL *URLItem `json:"audio_url,omitempty"`
	Role     string   `json:"role,omitempty"`
}

// URLItem is the {"url"} object of a media content item.
type URLItem struct {
	URL string `json:"url"`
}

type wireTask struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Status  string `json:"status"`
	Content *struct {
		VideoURL string `json:"video_url"`
	} `json:"content"`
	Usage *struct {
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Error    *wireError `json:"error"`
	Duration int64      `json:"duration"`
}

// Content is the content array of a normalized all-in-one video request.
func Content(in videoRequest) []ContentItem {
	var out []ContentItem
	if p := strings.TrimSpace(in.Prompt); p != "" {
		out = append(out, ContentItem{Type: "text", Text: in.Prompt})
	}
	for _, f := range in.ImageWithRoles {
		out = append(out, ContentItem{Type: "image_url", ImageURL: &URLItem{f.URL}, Role: f.Role})
	}
	for _, u := range in.ReferenceImages {
		out = append(out, ContentItem{Type: "image_url", ImageURL: &URLItem{u}, Role: "reference_image"})
	}
	for _, v := range in.VideoList {
		out = append(out, ContentItem{Type: "video_url", VideoURL: &URLItem{v.VideoURL}, Role: "reference_video"})
	}
	for _, v := range in.VideoWithRoles {
		out = append(out, ContentItem{Type: "video_url", VideoURL: &URLItem{v.URL}, Role: "reference_video"})
	}
	for _, v := range in.AudioWithRoles {
		out = append(out, ContentItem{Type: "audio_url", AudioURL: &URLItem{v.URL}, Role: "reference_audio"})
	}
	return out
}

func (a Adapter) submitVideo(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	var in videoRequest
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if len(in.Metadata.Media) > 0 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (ark) cannot take files or web links (metadata.media)", c.Backend.Name)
	}
	w := wireTaskRequest{Model: c.Model(), Content: Content(in), Ratio: in.Ratio, Duration: in.Duration,
		Resolution: in.Resolution, Seed: in.Seed, Watermark: in.Watermark, GenerateAudio: in.Audio}
	body, _ := json.Marshal(w)
	x, err := a.exchange(ctx, c, http.MethodPost, PathTasks, body, true, DefaultTaskTimeout)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var t wireTask
	if err := json.Unmarshal(x.Body, &t); err != nil || t.ID == "" {
		// Something may have been accepted that we cannot name: moving to
		// another backend could generate (and be charged) twice.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream accepted the submission without a task ID", Err: err}
	}
	return upstream.Submitted{ID: t.ID}, nil
}

func (a Adapter) pollVideo(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	x, err := a.exchange(ctx, c, http.MethodGet, PathTasks+"/"+url.PathEscape(id), nil, false, DefaultTaskTimeout)
	if err != nil {
		return upstream.Status{}, err
	}
	var t wireTask
	if err := json.Unmarshal(x.Body, &t); err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's task answer is not valid JSON", Err: err}
	}
	retry := upstream.ParseRetryAfter(x.Header.Get("Retry-After"), a.now())
	switch t.Status {
	case "queued":
		return upstream.Status{State: upstream.Running, RetryAfter: retry}, nil
	case "running":
		return upstream.Status{State: upstream.Running, Progress: Progress(c.Elapsed, expected(c.Backend)), RetryAfter: retry}, nil
	case "succeeded":
		if t.Content == nil || t.Content.VideoURL == "" {
			return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream finished the task without a video"}, nil
		}
		st := upstream.Status{State: upstream.Succeeded, Progress: 100, VideoSeconds: t.Duration,
			Outputs: []upstream.Output{{URL: t.Content.VideoURL}}}
		if u := t.Usage; u != nil && u.TotalTokens >= u.CompletionTokens {
			// Seedance counts the generated video's tokens as completion
			// tokens; the total adds nothing else today, and whatever it
			// adds is input.
			st.Usage = &upstream.ImageUsage{InputTokens: u.TotalTokens - u.CompletionTokens,
				OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		}
		return st, nil
	case "failed":
		st := upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream failed the task"}
		if e := t.Error; e != nil {
			if e.Message != "" {
				st.ErrorMessage = e.Message
			}
			st.ErrorCode = errorCode(e.Code)
		}
		return st, nil
	case "cancelled":
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream task was cancelled"}, nil
	case "expired":
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream task expired before it ran"}, nil
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
		Message: fmt.Sprintf("the upstream's task has an unknown status %q", t.Status)}
}

// Progress estimates a running task's progress from how long it has run:
// 5 at the start, linear to 95 at the expected duration, never more.
func Progress(elapsed, expected time.Duration) int {
	if expected <= 0 {
		expected = DefaultExpectedDuration
	}
	p := 5 + int(90*elapsed/expected)
	return min(max(p, 5), 95)
}

func expected(b upstream.Backend) time.Duration {
	if d, err := time.ParseDuration(b.Options["expectedDuration"]); err == nil && d > 0 {
		return d
	}
	return DefaultExpectedDuration
}
