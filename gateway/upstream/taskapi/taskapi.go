// Package taskapi is the upstream adapter for APIs that speak this gateway's
// own asynchronous task contract: another modelgate, or a compatible
// aggregator.
//
// Submit: POST {baseURL}/v1/images/generations or /v1/videos/generations
// with "Authorization: Bearer <credential>", the validated request with the
// upstream model, client_business_id set to our task ID (the contract's
// replay key: a repeated submission returns the first task) and the same
// value as Idempotency-Key. The answer is a task object:
//
//	{"id": "task_…" (or "task_id"), "status": "queued|in_progress|completed|failed",
//	 "progress": 0-100, "result": {"type": "image", "data": [{"url": …}]},
//	 "error": {"code": …, "message": …}}
//
// Poll: GET {baseURL}/v1/{images|videos}/generations/{id}, same object. A
// 429 or 503 with Retry-After (seconds or an HTTP date) sets the wait before
// the next poll.
package taskapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Name is the provider name.
const Name = "taskapi"

// Default exchange timeouts (a backend's timeoutSeconds overrides both).
const (
	DefaultSubmitTimeout = 60 * time.Second
	DefaultPollTimeout   = 30 * time.Second
)

// Adapter implements upstream.TaskAdapter for the task contract.
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

func path(k upstream.Kind) string {
	if k == upstream.Video {
		return "/v1/videos/generations"
	}
	return "/v1/images/generations"
}

// Submit implements upstream.TaskAdapter.
func (a Adapter) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if err := upstream.CheckBase(c.Backend); err != nil {
		return upstream.Submitted{}, err
	}
	body, err := requestBody(c)
	if err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.Backend.TimeoutOr(DefaultSubmitTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream.Endpoint(c.Backend.BaseURL, path(c.Kind)), bytes.NewReader(body))
	if err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Failover, Message: "invalid upstream URL", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", c.TaskID)
	authorize(req, c.Backend)
	x, err := upstream.Do(a.Client, req, upstream.Failover)
	if err != nil {
		return upstream.Submitted{}, err
	}
	if x.Status < 200 || x.Status > 299 {
		return upstream.Submitted{}, upstream.StatusError(x, true, a.now())
	}
	obj, err := decode(x.Body)
	if err != nil || obj.id() == "" {
		// The upstream may have accepted something we cannot name: moving
		// to another backend could generate (and be charged) twice.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream accepted the submission without a task ID", Err: err}
	}
	sub := upstream.Submitted{ID: obj.id()}
	if st := obj.status(); st.State != upstream.Running {
		sub.Final = &st
	}
	return sub, nil
}

// Poll implements upstream.TaskAdapter.
func (a Adapter) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if err := upstream.CheckBase(c.Backend); err != nil {
		err.Class = upstream.Permanent
		return upstream.Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Backend.TimeoutOr(DefaultPollTimeout))
	defer cancel()
	u := upstream.Endpoint(c.Backend.BaseURL, path(c.Kind)) + "/" + url.PathEscape(id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Permanent, Message: "invalid upstream URL", Err: err}
	}
	authorize(req, c.Backend)
	x, err := upstream.Do(a.Client, req, upstream.Transient)
	if err != nil {
		return upstream.Status{}, err
	}
	if x.Status < 200 || x.Status > 299 {
		return upstream.Status{}, upstream.StatusError(x, false, a.now())
	}
	obj, err := decode(x.Body)
	if err != nil {
		return upstream.Status{}, &upstream.Error{Class: upstream.Transient, Status: x.Status,
			Message: "the upstream's task answer is not a task object", Retryable: true, Err: err}
	}
	st := obj.status()
	st.RetryAfter = upstream.ParseRetryAfter(x.Header.Get("Retry-After"), a.now())
	return st, nil
}

func authorize(req *http.Request, b upstream.Backend) {
	req.Header.Set("Accept", "application/json")
	if k := strings.TrimSpace(b.APIKey); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
}

// requestBody is the stored request with the upstream model and our task
// ID as the upstream's replay key.
func requestBody(c upstream.Call) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c.Request, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	model, _ := json.Marshal(c.Model())
	m["model"] = model
	if c.TaskID != "" {
		id, _ := json.Marshal(c.TaskID)
		m["client_business_id"] = id
	}
	return json.Marshal(m)
}

// task is the contract's task object, read leniently (aggregators differ
// in the ID field, status words and number encodings).
type task struct {
	ID       string          `json:"id"`
	TaskID   string          `json:"task_id"`
	Status   string          `json:"status"`
	Progress json.RawMessage `json:"progress"`
	URL      string          `json:"url"`
	Duration json.RawMessage `json:"duration"`
	Result   *struct {
		Type     string          `json:"type"`
		Duration json.RawMessage `json:"duration"`
		Data     []struct {
			URL     string `json:"url"`
			B64JSON string `json:"b64_json"`
		} `json:"data"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
	// Usage is the image token usage of a token-priced model.
	Usage *upstream.ImageUsage `json:"usage"`
	// Data wraps the task in some aggregators ({"code":0,"data":{…}}).
	Data json.RawMessage `json:"data"`
}

func decode(body []byte) (*task, error) {
	t := &task{}
	if err := json.Unmarshal(body, t); err != nil {
		return nil, err
	}
	if t.id() == "" && t.Status == "" && len(t.Data) > 0 && t.Data[0] == '{' {
		return decode(t.Data)
	}
	return t, nil
}

func (t *task) id() string {
	if t.ID != "" {
		return t.ID
	}
	return t.TaskID
}

func (t *task) status() upstream.Status {
	switch strings.ToLower(t.Status) {
	case "completed", "succeeded", "success", "done":
		st := upstream.Status{State: upstream.Succeeded, Progress: 100, VideoSeconds: seconds(t.Duration)}
		if t.Usage.Valid() {
			st.Usage = t.Usage
		}
		if r := t.Result; r != nil {
			for _, d := range r.Data {
				switch {
				case d.URL != "":
					st.Outputs = append(st.Outputs, upstream.Output{URL: d.URL})
				case d.B64JSON != "":
					data, err := base64.StdEncoding.DecodeString(d.B64JSON)
					if err == nil {
						st.Outputs = append(st.Outputs, upstream.Output{Data: data})
					}
				}
			}
			if st.VideoSeconds == 0 {
				st.VideoSeconds = seconds(r.Duration)
			}
		}
		if len(st.Outputs) == 0 && t.URL != "" {
			st.Outputs = append(st.Outputs, upstream.Output{URL: t.URL})
		}
		if len(st.Outputs) == 0 {
			return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream completed the task without any output"}
		}
		return st
	case "failed", "failure", "error", "cancelled", "canceled", "expired":
		msg := errorText(t.Error)
		if msg == "" {
			msg = "the upstream failed the generation"
		}
		return upstream.Status{State: upstream.Failed, ErrorMessage: msg, ErrorCode: upstream.ErrorObjectCode(t.Error)}
	}
	return upstream.Status{State: upstream.Running, Progress: progress(t.Progress)}
}

func errorText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var e struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// number reads a JSON number or a numeric string ("45", "45%").
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64); err == nil {
			return f, true
		}
	}
	return 0, false
}

func progress(raw json.RawMessage) int {
	f, ok := number(raw)
	if !ok || math.IsNaN(f) {
		return 0
	}
	return int(min(max(f, 0), 100))
}

func seconds(raw json.RawMessage) int64 {
	f, ok := number(raw)
	if !ok || math.IsNaN(f) || f <= 0 {
		return 0
	}
	return int64(math.Ceil(min(f, 24*3600)))
}

var _ upstream.TaskAdapter = Adapter{}

// String names the adapter (for logs).
func (Adapter) String() string { return fmt.Sprintf("upstream adapter %q", Name) }
