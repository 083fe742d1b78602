// Package dashscope is the adapter for Alibaba Cloud Model Studio's
// (DashScope's) asynchronous image-synthesis task API, and its synchronous
// multimodal-generation service for the qwen-image-edit models (edit.go),
// serving the single-image family (one prompt, up to three reference
// images, explicit pixel sizes).
//
// Submit: POST {baseURL}/api/v1/services/aigc/image2image/image-synthesis
// (with reference images: the wan image-edit models) or
// .../text2image/image-synthesis (without), headers "Authorization: Bearer
// <key>" and "X-DashScope-Async: enable" (the HTTP API refuses synchronous
// calls), body {"model", "input": {"prompt", "negative_prompt", "images"},
// "parameters": {"size": "W*H", "n", "prompt_extend", "watermark", "seed"}}.
// The answer is {"output": {"task_id", "task_status"}, "request_id"}.
//
// Poll: GET {baseURL}/api/v1/tasks/{task_id}: task_status PENDING or
// RUNNING is running, SUCCEEDED carries output.results[].url (short-lived
// OSS URLs the controller downloads into the blob store) and
// usage.image_count, FAILED carries output.code and output.message,
// CANCELED and UNKNOWN (expired or unknown task) fail the task.
//
// Cancel: POST {baseURL}/api/v1/tasks/{task_id}/cancel, best effort (only
// a PENDING task can be canceled).
//
// Errors are {"request_id", "code", "message"}: DataInspectionFailed (and
// the other inspection codes) is a content-policy refusal, Throttling* a
// retryable 429, InvalidParameter a 400 that fails the task.
package dashscope

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

// Name is the provider's registered name.
const Name = "dashscope"

// Paths of the image-synthesis API.
const (
	PathImageToImage = "/api/v1/services/aigc/image2image/image-synthesis"
	PathTextToImage  = "/api/v1/services/aigc/text2image/image-synthesis"
	PathTasks        = "/api/v1/tasks/"
)

// Default exchange timeouts (a backend's timeoutSeconds overrides both).
const (
	DefaultSubmitTimeout = 60 * time.Second
	DefaultPollTimeout   = 30 * time.Second
)

// Adapter implements upstream.TaskAdapter and upstream.Canceler.
type Adapter struct {
	// Now is the clock for HTTP-date Retry-After values (nil: time.Now).
	Now func() time.Time
	// Client sends the vendor requests (nil: upstream.ClientOr).
	Client *http.Client
}

func (a Adapter) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// request is the single-image family's validated request.
type request struct {
	Prompt    string   `json:"prompt"`
	Size      string   `json:"size"`
	N         *int64   `json:"n"`
	ImageURLs []string `json:"image_urls"`
	Metadata  struct {
		PromptExtend   *bool  `json:"prompt_extend"`
		NegativePrompt string `json:"negative_prompt"`
		Seed           *int64 `json:"seed"`
		Watermark      *bool  `json:"watermark"`
	} `json:"metadata"`
}

type wireRequest struct {
	Model      string         `json:"model"`
	Input      wireInput      `json:"input"`
	Parameters wireParameters `json:"parameters"`
}

type wireInput struct {
	Prompt         string   `json:"prompt"`
	NegativePrompt string   `json:"negative_prompt,omitempty"`
	Images         []string `json:"images,omitempty"`
}

type wireParameters struct {
	Size         string `json:"size,omitempty"`
	N            *int64 `json:"n,omitempty"`
	PromptExtend *bool  `json:"prompt_extend,omitempty"`
	Watermark    *bool  `json:"watermark,omitempty"`
	Seed         *int64 `json:"seed,omitempty"`
}

// wireTask is the answer of a submission and of a task query.
type wireTask struct {
	RequestID string `json:"request_id"`
	Output    struct {
		TaskID     string `json:"task_id"`
		TaskStatus string `json:"task_status"`
		Code       string `json:"code"`
		Message    string `json:"message"`
		Results    []struct {
			URL     string `json:"url"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"results"`
	} `json:"output"`
	Usage *struct {
		ImageCount int64 `json:"image_count"`
	} `json:"usage"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MaxRefs is how many reference images the image-edit models take.
const MaxRefs = 3

// Submit implements upstream.TaskAdapter.
func (a Adapter) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if c.Kind != upstream.Image {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (dashscope) makes images only", c.Backend.Name)
	}
	var in request
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if len(in.ImageURLs) > MaxRefs {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (dashscope) takes at most %d reference images", c.Backend.Name, MaxRefs)
	}
	switch api := c.Backend.Options[OptionAPI]; api {
	case "", APIImageSynthesis:
	case APIMultimodalGeneration:
		return a.submitEdit(ctx, c, &in)
	default:
		return upstream.Submitted{}, upstream.Unsupported("backend %q (dashscope): option %s %q is not %s or %s",
			c.Backend.Name, OptionAPI, api, APIImageSynthesis, APIMultimodalGeneration)
	}
	w := wireRequest{Model: c.Model(),
		Input: wireInput{Prompt: in.Prompt, NegativePrompt: in.Metadata.NegativePrompt, Images: in.ImageURLs},
		Parameters: wireParameters{Size: wireSize(in.Size), N: in.N, PromptExtend: in.Metadata.PromptExtend,
			Watermark: in.Metadata.Watermark, Seed: in.Metadata.Seed}}
	path := PathTextToImage
	if len(in.ImageURLs) > 0 {
		path = PathImageToImage
	}
	if p := c.Backend.Options["path"]; p != "" {
		path = p // a model published on another image-synthesis endpoint
	}
	body, _ := json.Marshal(w)
	x, err := a.exchange(ctx, c, exchange{method: http.MethodPost, path: path, body: body, submit: true, async: true})
	if err != nil {
		return upstream.Submitted{}, err
	}
	var t wireTask
	if err := json.Unmarshal(x.Body, &t); err != nil || t.Output.TaskID == "" {
		// Something may have been accepted that we cannot name: moving to
		// another backend could generate (and be charged) twice.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream accepted the submission without a task ID", Err: err}
	}
	return upstream.Submitted{ID: t.Output.TaskID}, nil
}

// wireSize writes the contract's WIDTHxHEIGHT as DashScope's W*H.
func wireSize(s string) string {
	return strings.NewReplacer("x", "*", "X", "*").Replace(strings.TrimSpace(s))
}

// Poll implements upstream.TaskAdapter.
func (a Adapter) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if c.Backend.Options[OptionAPI] == APIMultimodalGeneration {
		// The service is synchronous: a task found waiting on it lost its
		// result.
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent,
			Message: "DashScope's multimodal-generation service is synchronous and has no task to poll"}
	}
	x, err := a.exchange(ctx, c, exchange{method: http.MethodGet, path: PathTasks + url.PathEscape(id)})
	if err != nil {
		return upstream.Status{}, err
	}
	var t wireTask
	if err := json.Unmarshal(x.Body, &t); err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's task answer is not valid JSON", Err: err}
	}
	retry := upstream.ParseRetryAfter(x.Header.Get("Retry-After"), a.now())
	switch t.Output.TaskStatus {
	case "PENDING":
		return upstream.Status{State: upstream.Running, RetryAfter: retry}, nil
	case "RUNNING":
		return upstream.Status{State: upstream.Running, Progress: 50, RetryAfter: retry}, nil
	case "SUCCEEDED":
		var outs []upstream.Output
		for _, r := range t.Output.Results {
			if r.URL != "" { // a result may instead carry its own code and message
				outs = append(outs, upstream.Output{URL: r.URL})
			}
		}
		if len(outs) == 0 {
			st := upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream finished the task without an image"}
			for _, r := range t.Output.Results {
				if r.Message != "" {
					st.ErrorMessage = r.Message
					st.ErrorCode = errorCode(r.Code)
					break
				}
			}
			return st, nil
		}
		return upstream.Status{State: upstream.Succeeded, Progress: 100, Outputs: outs}, nil
	case "FAILED":
		msg := t.Output.Message
		if msg == "" {
			msg = "the upstream failed the task"
		}
		return upstream.Status{State: upstream.Failed, ErrorMessage: msg, ErrorCode: errorCode(t.Output.Code)}, nil
	case "CANCELED":
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream task was canceled"}, nil
	case "UNKNOWN":
		// DashScope keeps a task for 24 hours; after that (or for an ID it
		// never issued) the query answers UNKNOWN and nothing can be fetched.
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream no longer knows the task"}, nil
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
		Message: fmt.Sprintf("the upstream's task has an unknown status %q", t.Output.TaskStatus)}
}

// Cancel implements upstream.Canceler.
func (a Adapter) Cancel(ctx context.Context, c upstream.Call, id string) error {
	_, err := a.exchange(ctx, c, exchange{method: http.MethodPost, path: PathTasks + url.PathEscape(id) + "/cancel"})
	return err
}

// errorCode maps a DashScope error code to the task error code: the
// content-inspection codes are the contract's content_policy_violation,
// others are passed on as they are.
func errorCode(code string) string {
	if IsPolicy(code) {
		return upstream.CodePolicy
	}
	return code
}

// IsPolicy reports a DashScope code that means the input or output was
// refused by content inspection (DataInspectionFailed,
// DataInspectionFailed.Output, IPInfringementSuspect, …).
func IsPolicy(code string) bool {
	return strings.HasPrefix(code, "DataInspection") || strings.Contains(code, "InspectionFailed") || code == "IPInfringementSuspect"
}

// exchange is one request to DashScope.
type exchange struct {
	method, path string
	body         []byte
	// submit: nothing was accepted yet; async: the X-DashScope-Async
	// header the image-synthesis submission needs.
	submit, async bool
	// timeout replaces the default (DefaultSubmitTimeout or
	// DefaultPollTimeout); a backend's timeoutSeconds overrides both.
	timeout time.Duration
}

// exchange sends one request and classifies a non-2xx answer.
func (a Adapter) exchange(ctx context.Context, c upstream.Call, e exchange) (*upstream.Exchange, error) {
	submit := e.submit
	if err := upstream.CheckBase(c.Backend); err != nil {
		if !submit {
			err.Class = upstream.Permanent
		}
		return nil, err
	}
	timeout := e.timeout
	switch {
	case timeout > 0:
	case submit:
		timeout = DefaultSubmitTimeout
	default:
		timeout = DefaultPollTimeout
	}
	bearer := upstream.KeyHeader("Authorization", "Bearer ", c.Backend.APIKey)
	x, err := upstream.TaskRequest{Method: e.method, URL: strings.TrimRight(c.Backend.BaseURL, "/") + e.path, Body: e.body,
		Submit: submit, Timeout: c.Backend.TimeoutOr(timeout), Authorize: func(req *http.Request) {
			bearer(req)
			if e.async {
				req.Header.Set("X-DashScope-Async", "enable")
			}
		}, Client: a.Client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if !x.OK() {
		ue := upstream.StatusError(x, submit, a.now())
		var v struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(x.Body, &v)
		ue.Code = v.Code
		if IsPolicy(v.Code) {
			ue.Code = upstream.CodePolicy
			if ue.Class != upstream.Permanent { // a refusal is the request's fault, wherever it is sent
				ue.Class, ue.Retryable = upstream.Permanent, false
			}
		}
		return nil, ue
	}
	return x, nil
}

var (
	_ upstream.TaskAdapter = Adapter{}
	_ upstream.Canceler    = Adapter{}
)
