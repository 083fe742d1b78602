// The task capability of the gemini provider: images from the Gemini image
// models' generateContent (image.go, synchronous) and videos from Veo's
// predictLongRunning with operation polling (veo.go). The task's type
// picks the API; docs/providers.md has the mapping.

package gemini

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Submit implements upstream.TaskAdapter.
func (p *Provider) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if c.Kind == upstream.Video {
		return p.submitVideo(ctx, c)
	}
	return p.generateImage(ctx, c)
}

// Poll implements upstream.TaskAdapter. Images are synchronous: a task
// found waiting on one lost its result.
func (p *Provider) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if c.Kind == upstream.Video {
		return p.pollVideo(ctx, c, id)
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Permanent,
		Message: "Gemini image generation is synchronous and has no task to poll"}
}

// base is the backend's API root with its version: {baseURL}/{apiVersion}.
func base(b upstream.Backend) string {
	root := strings.TrimRight(b.BaseURL, "/")
	if root == "" {
		root = DefaultBaseURL
	}
	version := b.Options["apiVersion"]
	if version == "" {
		version = DefaultAPIVersion
	}
	return root + "/" + version
}

// exchange sends one task request with the key in x-goog-api-key and
// classifies a non-2xx answer (submit: nothing was accepted).
func (p *Provider) exchange(ctx context.Context, c upstream.Call, method, url string, body []byte, submit bool, timeout time.Duration) (*upstream.Exchange, error) {
	x, err := upstream.TaskRequest{Method: method, URL: url, Body: body, Submit: submit,
		Timeout: c.Backend.TimeoutOr(timeout), Authorize: upstream.KeyHeader("x-goog-api-key", "", c.Backend.APIKey), Client: p.client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if x.OK() {
		return x, nil
	}
	return nil, statusError(x, submit)
}

// statusError classifies a Gemini error answer
// ({"error":{"code","message","status","details"}}): the common task
// classes, with Google's RetryInfo delay as the Retry-After it does not
// send, an invalid key (400 API_KEY_INVALID) treated as the backend's
// credential, and a content refusal as the policy code.
func statusError(x *upstream.Exchange, submit bool) *upstream.Error {
	e := upstream.StatusError(x, submit, time.Now())
	var v struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(x.Body, &v)
	e.Code = v.Error.Status
	if e.RetryAfter == 0 {
		e.RetryAfter = min(RetryDelay(x.Body), upstream.MaxRetryAfter)
	}
	keyInvalid := strings.HasPrefix(v.Error.Message, "API key not valid")
	for _, d := range v.Error.Details {
		keyInvalid = keyInvalid || d.Reason == "API_KEY_INVALID"
	}
	switch {
	case keyInvalid && submit:
		e.Class, e.Retryable = upstream.Failover, false
		e.Message = "the upstream refused the backend's credential: " + e.Message
	case keyInvalid:
		e.Class, e.Retryable = upstream.Permanent, false
	case x.Status == http.StatusBadRequest && isPolicyMessage(v.Error.Message):
		e.Class, e.Retryable, e.Code = upstream.Permanent, false, upstream.CodePolicy
	}
	return e
}

// isPolicyMessage reports a Google error or operation message that says
// the content was refused (Google gives such refusals no code of their
// own: they are INVALID_ARGUMENT with a message about safety or the usage
// guidelines).
func isPolicyMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"safety", "usage guideline", "responsible ai", "polic", "prohibited"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

var _ upstream.TaskAdapter = (*Provider)(nil)
