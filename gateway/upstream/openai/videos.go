// The video family of the openai provider: OpenAI's Videos API (Sora),
// which is asynchronous.
//
// Submit: POST {baseURL}/v1/videos with a JSON body {"model", "prompt",
// "seconds", "size", "input_reference": {"image_url"}} (the API takes JSON
// or multipart; JSON carries a reference image by URL without downloading
// it). The answer is a video object {"id", "object": "video", "status",
// "progress", "seconds", "size", "error", …}.
//
// Poll: GET {baseURL}/v1/videos/{id}; status queued or in_progress is
// running (with progress), completed fetches GET /v1/videos/{id}/content
// (the MP4, which needs the credential, so the adapter downloads it and
// hands the controller the bytes), failed fails the task with the video's
// error (code content_policy_violation when OpenAI's code says policy or
// moderation).
//
// Cancel: DELETE {baseURL}/v1/videos/{id}, best effort (OpenAI documents it
// for finished videos; an in-progress one may refuse).

package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Video defaults.
const (
	// DefaultVideoTimeout bounds one Videos API exchange but the download.
	DefaultVideoTimeout = 60 * time.Second
	// DefaultVideoDownloadTimeout bounds the download of a finished video.
	DefaultVideoDownloadTimeout = 10 * time.Minute
	// MaxVideoBytes bounds a downloaded video.
	MaxVideoBytes = 512 << 20
	// DefaultLandscapeVideoSize and DefaultPortraitVideoSize are the sizes
	// for aspect ratios (sora-2's; the option "size" forces another).
	DefaultLandscapeVideoSize = "1280x720"
	DefaultPortraitVideoSize  = "720x1280"
)

// videoSeconds are the clip lengths the API accepts, shortest first.
var videoSeconds = []int64{4, 8, 12}

type videoRequest struct {
	Prompt         string   `json:"prompt"`
	Duration       *int64   `json:"duration"`
	Ratio          string   `json:"ratio"`
	AspectRatio    string   `json:"aspect_ratio"`
	Size           string   `json:"size"`
	ImageURLs      []string `json:"image_urls"`
	ImageWithRoles []struct {
		URL  string `json:"url"`
		Role string `json:"role"`
	} `json:"image_with_roles"`
	VideoWithRoles []json.RawMessage `json:"video_with_roles"`
	AudioWithRoles []json.RawMessage `json:"audio_with_roles"`
}

type wireVideoRequest struct {
	Model          string         `json:"model,omitempty"`
	Prompt         string         `json:"prompt"`
	Seconds        string         `json:"seconds,omitempty"`
	Size           string         `json:"size,omitempty"`
	InputReference *wireReference `json:"input_reference,omitempty"`
}

type wireReference struct {
	ImageURL string `json:"image_url"`
}

// wireVideo is OpenAI's video object.
type wireVideo struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress int    `json:"progress"`
	Seconds  string `json:"seconds"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (p *Provider) submitVideo(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	var in videoRequest
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if len(in.VideoWithRoles) > 0 || len(in.AudioWithRoles) > 0 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (openai) cannot take reference videos or audio", c.Backend.Name)
	}
	refs := append([]string(nil), in.ImageURLs...)
	for _, r := range in.ImageWithRoles {
		if r.Role == "last_frame" {
			return upstream.Submitted{}, upstream.Unsupported("backend %q (openai) cannot take a last frame", c.Backend.Name)
		}
		refs = append(refs, r.URL)
	}
	if len(refs) > 1 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (openai) takes at most one reference image", c.Backend.Name)
	}
	w := wireVideoRequest{Model: c.Model(), Prompt: in.Prompt, Size: videoSize(in, c.Backend.Options)}
	secs := c.DurationSeconds
	if in.Duration != nil && *in.Duration > 0 {
		secs = *in.Duration
	}
	if secs > 0 {
		s, ok := VideoSeconds(secs)
		if !ok {
			return upstream.Submitted{}, upstream.Unsupported("backend %q (openai) makes videos of at most %d seconds", c.Backend.Name, videoSeconds[len(videoSeconds)-1])
		}
		w.Seconds = strconv.FormatInt(s, 10)
	}
	if len(refs) == 1 {
		w.InputReference = &wireReference{ImageURL: refs[0]}
	}
	body, _ := json.Marshal(w)
	x, err := p.videoExchange(ctx, c, http.MethodPost, "/v1/videos", body, true)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var v wireVideo
	if err := json.Unmarshal(x.Body, &v); err != nil || v.ID == "" {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's video answer is not a video object", Err: err}
	}
	return upstream.Submitted{ID: v.ID}, nil
}

// VideoSeconds is the shortest clip length the API accepts that covers
// secs (the tenant is billed for what it asked, at most what was made).
func VideoSeconds(secs int64) (int64, bool) {
	for _, s := range videoSeconds {
		if secs <= s {
			return s, true
		}
	}
	return 0, false
}

func videoSize(in videoRequest, o map[string]string) string {
	if v := o["size"]; v != "" {
		return v
	}
	if s := strings.ToLower(strings.TrimSpace(in.Size)); strings.Contains(s, "x") {
		return s
	}
	ratio := in.Ratio
	if ratio == "" {
		ratio = in.AspectRatio
	}
	if a, b, ok := strings.Cut(ratio, ":"); ok {
		w, err1 := strconv.ParseFloat(a, 64)
		h, err2 := strconv.ParseFloat(b, 64)
		if err1 == nil && err2 == nil && w > 0 && h > 0 {
			if w >= h {
				return opt(o, "landscapeSize", DefaultLandscapeVideoSize)
			}
			return opt(o, "portraitSize", DefaultPortraitVideoSize)
		}
	}
	return "" // the API's default
}

func opt(o map[string]string, k, def string) string {
	if v := o[k]; v != "" {
		return v
	}
	return def
}

func (p *Provider) pollVideo(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	x, err := p.videoExchange(ctx, c, http.MethodGet, "/v1/videos/"+url.PathEscape(id), nil, false)
	if err != nil {
		return upstream.Status{}, err
	}
	var v wireVideo
	if err := json.Unmarshal(x.Body, &v); err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's video answer is not valid JSON", Err: err}
	}
	switch v.Status {
	case "queued", "in_progress":
		return upstream.Status{State: upstream.Running, Progress: v.Progress,
			RetryAfter: upstream.ParseRetryAfter(x.Header.Get("Retry-After"), time.Now())}, nil
	case "failed":
		st := upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream failed the video"}
		if v.Error != nil {
			if v.Error.Message != "" {
				st.ErrorMessage = v.Error.Message
			}
			if isPolicy(v.Error.Code) {
				st.ErrorCode = upstream.CodePolicy
			}
		}
		return st, nil
	case "completed":
		data, ctype, err := p.downloadVideo(ctx, c, id)
		if err != nil {
			return upstream.Status{}, err
		}
		secs, _ := strconv.ParseInt(v.Seconds, 10, 64)
		return upstream.Status{State: upstream.Succeeded, Progress: 100, VideoSeconds: secs,
			Outputs: []upstream.Output{{Data: data, ContentType: ctype}}}, nil
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
		Message: fmt.Sprintf("the upstream's video has an unknown status %q", v.Status)}
}

// isPolicy reports an OpenAI error code that means the content was refused.
func isPolicy(code string) bool {
	code = strings.ToLower(code)
	return strings.Contains(code, "policy") || strings.Contains(code, "moderation")
}

// downloadVideo reads the finished MP4. A failure is Transient: the
// controller polls again, and the next poll downloads again.
func (p *Provider) downloadVideo(ctx context.Context, c upstream.Call, id string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultVideoDownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.Endpoint(c.Backend.BaseURL, "/v1/videos/"+url.PathEscape(id)+"/content"), nil)
	if err != nil {
		return nil, "", &upstream.Error{Class: upstream.Permanent, Message: "invalid upstream URL", Err: err}
	}
	p.authorize(req, c.Backend)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the video could not be downloaded", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, "", upstream.StatusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}, false, time.Now())
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxVideoBytes+1))
	switch {
	case err != nil:
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the video download was cut off", Err: err}
	case len(data) > MaxVideoBytes:
		return nil, "", &upstream.Error{Class: upstream.Permanent, Message: "the upstream's video is too large"}
	case len(data) == 0:
		return nil, "", &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the upstream's video is empty"}
	}
	ctype := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ctype, "video/") {
		ctype = "video/mp4"
	}
	return data, ctype, nil
}

// Cancel implements upstream.Canceler.
func (p *Provider) Cancel(ctx context.Context, c upstream.Call, id string) error {
	if c.Kind != upstream.Video {
		return nil // image generations are synchronous: nothing is left upstream
	}
	_, err := p.videoExchange(ctx, c, http.MethodDelete, "/v1/videos/"+url.PathEscape(id), nil, false)
	return err
}

// videoExchange sends one Videos API request and classifies a non-2xx
// answer (submit: nothing was accepted).
func (p *Provider) videoExchange(ctx context.Context, c upstream.Call, method, path string, body []byte, submit bool) (*upstream.Exchange, error) {
	if err := upstream.CheckBase(c.Backend); err != nil {
		return nil, err
	}
	x, err := upstream.TaskRequest{Method: method, URL: upstream.Endpoint(c.Backend.BaseURL, path), Body: body, Submit: submit,
		Timeout: c.Backend.TimeoutOr(DefaultVideoTimeout), Authorize: func(req *http.Request) { p.authorize(req, c.Backend) }, Client: p.client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if !x.OK() {
		e := upstream.StatusError(x, submit, time.Now())
		if e.Class == upstream.Permanent && isPolicy(errorCode(x.Body)) {
			e.Code = upstream.CodePolicy
		}
		return nil, e
	}
	return x, nil
}

// errorCode is the code of an OpenAI error body.
func errorCode(body []byte) string {
	var v struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Error.Code
}

func (*Provider) authorize(req *http.Request, b upstream.Backend) {
	if k := strings.TrimSpace(b.APIKey); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	if v := b.Options["organization"]; v != "" {
		req.Header.Set("OpenAI-Organization", v)
	}
	if v := b.Options["project"]; v != "" {
		req.Header.Set("OpenAI-Project", v)
	}
}

var _ upstream.Canceler = (*Provider)(nil)
