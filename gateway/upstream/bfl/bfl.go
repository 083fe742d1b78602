// Package bfl is the adapter of Black Forest Labs' API (FLUX Kontext) for
// the image-edit family: text to image, or editing one reference image.
//
// Submit: POST {baseURL}/v1/{model} (flux-kontext-pro, flux-kontext-max)
// with header x-key and a JSON body {"prompt", "input_image",
// "aspect_ratio", "seed", "safety_tolerance", "output_format",
// "prompt_upsampling"}. The answer is {"id", "polling_url", "cost"?, …}.
//
// Poll: GET the polling_url (regional, e.g. api.us1.bfl.ai, so it is kept
// as the upstream task ID when it is on the backend's own domain; otherwise
// {baseURL}/v1/get_result?id={id}), header x-key. The answer {"id",
// "status", "result", "progress"}: Pending is running, Ready succeeded with
// result.sample a signed URL the controller downloads into the blob store,
// Request Moderated / Content Moderated fail with the policy code, Error
// and Task not found fail.
//
// BFL has no cancel endpoint, so the adapter is no upstream.Canceler.
package bfl

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider name of ModelRoute backends.
const Name = "bfl"

// DefaultTimeout bounds one exchange with the API.
const DefaultTimeout = 60 * time.Second

// Statuses of a BFL result.
const (
	StatusPending          = "Pending"
	StatusReady            = "Ready"
	StatusRequestModerated = "Request Moderated"
	StatusContentModerated = "Content Moderated"
	StatusError            = "Error"
	StatusTaskNotFound     = "Task not found"
)

// Adapter implements upstream.TaskAdapter for BFL. It holds no state.
type Adapter struct {
	// Client sends the vendor requests (nil: upstream.ClientOr).
	Client *http.Client
}

// New returns the adapter, sending with client.
func New(client *http.Client) Adapter { return Adapter{Client: client} }

// request is the stored, validated request of the image-edit family.
type request struct {
	Prompt    string   `json:"prompt"`
	Size      string   `json:"size"`
	ImageURLs []string `json:"image_urls"`
	Seed      *int64   `json:"seed"`
	Metadata  struct {
		ResponseFormat   string `json:"response_format"`
		SafetyTolerance  *int   `json:"safety_tolerance"`
		PromptUpsampling *bool  `json:"prompt_upsampling"`
		Seed             *int64 `json:"seed"`
	} `json:"metadata"`
}

// wireRequest is BFL's Kontext request body.
type wireRequest struct {
	Prompt           string `json:"prompt"`
	InputImage       string `json:"input_image,omitempty"`
	AspectRatio      string `json:"aspect_ratio,omitempty"`
	Seed             *int64 `json:"seed,omitempty"`
	SafetyTolerance  *int   `json:"safety_tolerance,omitempty"`
	OutputFormat     string `json:"output_format,omitempty"`
	PromptUpsampling *bool  `json:"prompt_upsampling,omitempty"`
}

type wireAsync struct {
	ID         string `json:"id"`
	PollingURL string `json:"polling_url"`
}

type wireResult struct {
	ID       string          `json:"id"`
	Status   string          `json:"status"`
	Result   json.RawMessage `json:"result"`
	Progress *float64        `json:"progress"`
	Details  json.RawMessage `json:"details"`
}

// Submit implements upstream.TaskAdapter.
func (ad Adapter) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if c.Kind != upstream.Image {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (bfl) makes images only", c.Backend.Name)
	}
	var in request
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if len(in.ImageURLs) > 1 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (bfl) takes at most one reference image", c.Backend.Name)
	}
	model := c.Model()
	if model == "" || strings.ContainsAny(model, "/?#") {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (bfl) has no usable upstream model %q", c.Backend.Name, model)
	}
	w := wireRequest{Prompt: in.Prompt, SafetyTolerance: in.Metadata.SafetyTolerance,
		PromptUpsampling: in.Metadata.PromptUpsampling, Seed: in.Seed}
	if in.Metadata.Seed != nil {
		w.Seed = in.Metadata.Seed
	}
	if len(in.ImageURLs) == 1 {
		w.InputImage = inputImage(in.ImageURLs[0])
	}
	// BFL keeps the input image's proportions when no aspect_ratio is sent;
	// it has no match_input_image value (its aspect_ratio is a W:H ratio).
	if in.Size != "" && in.Size != "match_input_image" {
		w.AspectRatio = in.Size
	}
	switch in.Metadata.ResponseFormat {
	case "jpg", "jpeg":
		w.OutputFormat = "jpeg"
	case "png":
		w.OutputFormat = "png"
	}
	body, _ := json.Marshal(w)
	if err := upstream.CheckBase(c.Backend); err != nil {
		return upstream.Submitted{}, err
	}
	x, err := ad.exchange(ctx, c.Backend, http.MethodPost, upstream.Endpoint(c.Backend.BaseURL, "/v1/"+url.PathEscape(model)), body, true)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var a wireAsync
	if err := json.Unmarshal(x.Body, &a); err != nil || a.ID == "" {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's answer has no task id", Err: err}
	}
	id := a.ID
	if sameSite(c.Backend.BaseURL, a.PollingURL) {
		id = a.PollingURL
	}
	return upstream.Submitted{ID: id}, nil
}

// inputImage is BFL's input_image: a URL, or the base64 of a data: URL
// (BFL takes bare base64, not data URLs).
func inputImage(ref string) string {
	if strings.HasPrefix(ref, "data:") {
		if _, b64, ok := strings.Cut(ref, ";base64,"); ok {
			return b64
		}
	}
	return ref
}

// sameSite reports whether the polling URL may be sent the backend's key:
// the same host as the base URL, or a host under the same parent domain
// (api.bfl.ai hands out api.us1.bfl.ai). Any other host would receive the
// credential, so the adapter polls get_result on the base URL instead.
func sameSite(base, polling string) bool {
	b, err1 := url.Parse(base)
	p, err2 := url.Parse(polling)
	if err1 != nil || err2 != nil || p.Host == "" || (p.Scheme != "https" && p.Scheme != b.Scheme) {
		return false
	}
	if p.Host == b.Host {
		return true
	}
	if p.Port() != "" || b.Port() != "" || net.ParseIP(p.Hostname()) != nil || net.ParseIP(b.Hostname()) != nil {
		return false
	}
	return strings.Count(b.Hostname(), ".") >= 1 && parent(p.Hostname()) == parent(b.Hostname())
}

// parent is a host's last two labels ("" for fewer).
func parent(host string) string {
	l := strings.Split(host, ".")
	if len(l) < 3 {
		return strings.Join(l, ".")
	}
	return strings.Join(l[len(l)-2:], ".")
}

// Poll implements upstream.TaskAdapter.
func (ad Adapter) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if err := upstream.CheckBase(c.Backend); err != nil {
		return upstream.Status{}, err
	}
	u := id
	if !strings.HasPrefix(id, "http://") && !strings.HasPrefix(id, "https://") {
		u = upstream.Endpoint(c.Backend.BaseURL, "/v1/get_result") + "?id=" + url.QueryEscape(id)
	} else if !sameSite(c.Backend.BaseURL, id) {
		// The backend's baseURL changed since submission.
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "the task's polling URL is not on the backend's host"}
	}
	x, err := ad.exchange(ctx, c.Backend, http.MethodGet, u, nil, false)
	if err != nil {
		return upstream.Status{}, err
	}
	var r wireResult
	if err := json.Unmarshal(x.Body, &r); err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's result answer is not valid JSON", Err: err}
	}
	switch r.Status {
	case StatusPending:
		return upstream.Status{State: upstream.Running, Progress: progress(r.Progress),
			RetryAfter: upstream.ParseRetryAfter(x.Header.Get("Retry-After"), time.Now())}, nil
	case StatusReady:
		var res struct {
			Sample string `json:"sample"`
		}
		_ = json.Unmarshal(r.Result, &res)
		if res.Sample == "" {
			return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
				Message: "the upstream's result is Ready without a sample"}
		}
		// The signed sample URL needs no key: the controller downloads it
		// (public addresses only) and stores the bytes in the blob store.
		return upstream.Status{State: upstream.Succeeded, Progress: 100, Outputs: []upstream.Output{{URL: res.Sample}}}, nil
	case StatusRequestModerated, StatusContentModerated:
		return upstream.Status{State: upstream.Failed, ErrorCode: upstream.CodePolicy,
			ErrorMessage: "the upstream refused the request for its content (" + r.Status + ")"}, nil
	case StatusError:
		msg := "the upstream failed the generation"
		if d := details(r.Details); d != "" {
			msg += ": " + d
		}
		return upstream.Status{State: upstream.Failed, ErrorMessage: msg}, nil
	case StatusTaskNotFound:
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status, Message: "the upstream does not know the task"}
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
		Message: fmt.Sprintf("the upstream's result has an unknown status %q", r.Status)}
}

// progress reads BFL's progress, a fraction (0–1) or a percentage.
func progress(p *float64) int {
	if p == nil || *p < 0 {
		return 0
	}
	v := *p
	if v <= 1 {
		v *= 100
	}
	return int(min(v, 99))
}

// details renders a result's details object briefly.
func details(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) > 512 {
		raw = raw[:512]
	}
	return string(raw)
}

// exchange sends one request with the key and classifies a non-2xx answer.
func (a Adapter) exchange(ctx context.Context, b upstream.Backend, method, u string, body []byte, submit bool) (*upstream.Exchange, error) {
	x, err := upstream.TaskRequest{Method: method, URL: u, Body: body, Submit: submit,
		Timeout: b.TimeoutOr(DefaultTimeout), Authorize: upstream.KeyHeader("x-key", "", b.APIKey), Client: a.Client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if x.OK() {
		return x, nil
	}
	e := upstream.StatusError(x, submit, time.Now())
	if m := detail(x.Body); m != "" {
		e.Message = m
		if submit && (x.Status == http.StatusUnauthorized || x.Status == http.StatusForbidden) {
			e.Message = "the upstream refused the backend's credential: " + m
		}
	}
	if x.Status == http.StatusPaymentRequired {
		// The backend's account is out of credits: nothing was accepted, and
		// another backend may serve the task; retrying this one will not help.
		e.Class, e.Retryable = upstream.Failover, false
		if !submit {
			e.Class = upstream.Permanent
		}
		e.Message = "the upstream account has insufficient credits: " + e.Message
	}
	return nil, e
}

// detail is the message of a FastAPI error body, BFL's shape:
// {"detail": "…"} or {"detail": [{"loc", "msg", "type"}, …]}.
func detail(body []byte) string {
	var v struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Detail) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Detail, &s) == nil {
		return s
	}
	var list []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(v.Detail, &list) == nil && len(list) > 0 {
		var parts []string
		for _, d := range list {
			loc := make([]string, 0, len(d.Loc))
			for _, l := range d.Loc {
				loc = append(loc, fmt.Sprint(l))
			}
			parts = append(parts, strings.Join(loc, ".")+": "+d.Msg)
		}
		return strings.Join(parts, "; ")
	}
	return ""
}

var _ upstream.TaskAdapter = Adapter{}
