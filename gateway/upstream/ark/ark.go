// Package ark is the adapter for Volcengine Ark and BytePlus ModelArk (the
// same API under two regional hosts): Seedream image generation for the
// multi-image family and the Seedance content-generation task API for the
// all-in-one video family.
//
// The backend's baseURL is the region's API root: https://ark.cn-beijing.volces.com
// (Volcengine, cn-beijing) or https://ark.ap-southeast.bytepluses.com (BytePlus,
// ap-southeast); a trailing /api/v3 is accepted too. Every request carries
// "Authorization: Bearer <API key>" (the Ark API key from the route's
// Secret). The upstream model is the Ark model ID or an endpoint ID (ep-…).
//
// Images (images.go): POST /api/v3/images/generations is synchronous; the
// answer is the result.
//
// Video (video.go): POST /api/v3/contents/generations/tasks answers {"id"};
// GET /api/v3/contents/generations/tasks/{id} reports queued, running,
// succeeded (content.video_url, usage.completion_tokens), failed (error),
// cancelled or expired; DELETE on the same path cancels a queued task.
//
// Private asset library (assets.go): the channel's asset reviewer, through
// the Volcengine OpenAPI signed with the account's AK/SK; a passed asset
// reaches Seedance as "asset://<id>".
//
// Errors have the shape {"error": {"code", "message", "param", "type"}}:
// the *SensitiveContentDetected* and *RiskDetection codes are content-policy
// refusals (HTTP 400), 429 (rate limits, QuotaExceeded, ServerOverloaded)
// and 5xx are retryable, 401/403 (AuthenticationError, AccountOverdueError,
// AccessDenied) and 404 of the endpoint or model (not activated on the
// backend's account) move the task to another backend, other 4xx fail it.
package ark

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider's registered name.
const Name = "ark"

// Paths of the Ark data-plane API.
const (
	PathImages = "/api/v3/images/generations"
	PathTasks  = "/api/v3/contents/generations/tasks"
)

// Adapter implements upstream.TaskAdapter, upstream.Canceler and
// upstream.AssetReviewer.
type Adapter struct {
	// Now is the clock for HTTP-date Retry-After values (nil: time.Now).
	Now func() time.Time
	// Client sends the vendor requests (nil: upstream.ClientOr).
	Client *http.Client
}

// New returns the adapter.
func New(client *http.Client) Adapter { return Adapter{Client: client} }

func (a Adapter) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Submit implements upstream.TaskAdapter.
func (a Adapter) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if c.Kind == upstream.Video {
		return a.submitVideo(ctx, c)
	}
	return a.generateImages(ctx, c)
}

// Poll implements upstream.TaskAdapter. Image generations are final at
// submission, so only video tasks are polled.
func (a Adapter) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if c.Kind != upstream.Video {
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "Ark image generations are synchronous and cannot be polled"}
	}
	return a.pollVideo(ctx, c, id)
}

// Cancel implements upstream.Canceler: DELETE of a video task. Ark cancels
// only a queued task (a running one answers an error, logged by the
// caller); image generations leave nothing upstream.
func (a Adapter) Cancel(ctx context.Context, c upstream.Call, id string) error {
	if c.Kind != upstream.Video || id == "" {
		return nil
	}
	_, err := a.exchange(ctx, c, http.MethodDelete, PathTasks+"/"+url.PathEscape(id), nil, false, DefaultTaskTimeout)
	return err
}

// wireError is Ark's error object.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param"`
	Type    string `json:"type"`
}

// IsPolicy reports an Ark error code that means the input or output was
// refused by content moderation: SensitiveContentDetected (and its
// .SevereViolation, .Violence variants), Input/OutputText/Image/Video
// SensitiveContentDetected (and .PrivacyInformation), and the
// ContentSecurity RiskDetection codes.
func IsPolicy(code string) bool {
	return strings.Contains(code, "SensitiveContentDetected") || strings.HasSuffix(code, "RiskDetection")
}

// errorCode is the task error code of an Ark error code.
func errorCode(code string) string {
	if IsPolicy(code) {
		return upstream.CodePolicy
	}
	return code
}

// base is the backend's API root without a trailing /api/v3.
func base(b upstream.Backend) string {
	u := strings.TrimRight(b.BaseURL, "/")
	return strings.TrimSuffix(u, "/api/v3")
}

// exchange sends one request and classifies a non-2xx answer (submit:
// nothing was accepted, so the task may move to another backend).
func (a Adapter) exchange(ctx context.Context, c upstream.Call, method, path string, body []byte, submit bool, def time.Duration) (*upstream.Exchange, error) {
	if err := upstream.CheckBase(c.Backend); err != nil {
		if !submit {
			err.Class = upstream.Permanent
		}
		return nil, err
	}
	x, err := upstream.TaskRequest{Method: method, URL: base(c.Backend) + path, Body: body, Submit: submit,
		Timeout: c.Backend.TimeoutOr(def), Authorize: upstream.KeyHeader("Authorization", "Bearer ", c.Backend.APIKey), Client: a.Client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if !x.OK() {
		return nil, a.statusError(x, submit)
	}
	return x, nil
}

// statusError classifies an Ark error answer on top of the common rules
// (upstream.StatusError): a policy code is a refusal of the request
// wherever it is sent; a submission to an endpoint or model the backend's
// account does not have (404) may succeed on another backend.
func (a Adapter) statusError(x *upstream.Exchange, submit bool) *upstream.Error {
	e := upstream.StatusError(x, submit, a.now())
	code := e.Code
	switch {
	case IsPolicy(code):
		e.Code, e.Class, e.Retryable = upstream.CodePolicy, upstream.Permanent, false
	case submit && x.Status == http.StatusNotFound && (strings.HasPrefix(code, "InvalidEndpoint") || strings.HasPrefix(code, "ModelNotOpen")):
		e.Class = upstream.Failover
		e.Message = "the backend's Ark account cannot use this model: " + e.Message
	}
	return e
}

var (
	_ upstream.TaskAdapter = Adapter{}
	_ upstream.Canceler    = Adapter{}
)
