package fakeupstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DashScope is a fake of Alibaba Cloud Model Studio's asynchronous
// image-synthesis API, written from the Wan 2.5 image-edit and text-to-image
// API references (alibabacloud.com/help/en/model-studio): POST
// /api/v1/services/aigc/image2image/image-synthesis (wan2.5-i2i-preview:
// input.images of 1 to 3 URLs required) and
// .../text2image/image-synthesis (wan2.5-t2i-preview, wan2.2-t2i-flash: no
// images), both requiring "X-DashScope-Async: enable" (without it the API
// answers 403 AccessDenied), input.prompt, parameters.size as W*H and n 1
// to 4; the answer is {"output": {"task_id", "task_status": "PENDING"},
// "request_id"}. GET /api/v1/tasks/{id} answers PENDING, then RUNNING, then
// SUCCEEDED with output.results[].url (served by the fake under /oss/,
// without the credential, like OSS's signed URLs) and usage.image_count, or
// FAILED with output.code and output.message. POST
// /api/v1/tasks/{id}/cancel cancels a PENDING task. Errors are
// {"request_id", "code", "message"}. It requires Authorization: Bearer
// Key(). DashScopePlan scripts each task's course; DashScopeFailure scripts
// submission answers.
type DashScope struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	plan     DashScopePlan
	failures []DashScopeFailure
	tasks    map[string]*dashTask
	reqs     []Request
	seq      int
}

// DashScopePlan scripts every task submitted after it is set.
type DashScopePlan struct {
	// Polls is how many queries answer PENDING/RUNNING before the final
	// state (the first answers PENDING).
	Polls int
	// RateLimited is how many of the first queries answer 429 Throttling
	// with RetryAfter.
	RateLimited int
	RetryAfter  string
	// FailCode and FailMessage make the task fail (e.g.
	// DataInspectionFailed) instead of succeeding.
	FailCode, FailMessage string
}

// DashScopeFailure scripts the answer to one submission.
type DashScopeFailure struct {
	Status     int
	Code       string // e.g. Throttling, DataInspectionFailed, InvalidParameter
	Message    string
	RetryAfter string
	Reset      bool
}

type dashTask struct {
	id, model string
	n         int
	status    string
	polls     int
	plan      DashScopePlan
	submitted time.Time
}

var dashModels = map[string]string{
	"wan2.5-i2i-preview":   "image2image",
	"wan2.5-t2i-preview":   "text2image",
	"wan2.2-t2i-flash":     "text2image",
	"qwen-image-edit":      "multimodal-generation",
	"qwen-image-edit-plus": "multimodal-generation",
	"qwen-image-edit-max":  "multimodal-generation",
}

var dashSize = regexp.MustCompile(`^([0-9]+)\*([0-9]+)$`)

// NewDashScope starts the fake.
func NewDashScope() *DashScope {
	f := &DashScope{key: DefaultKey, tasks: map[string]*dashTask{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *DashScope) Key() string { return f.key }

// SetPlan sets the course of the tasks submitted from now on.
func (f *DashScope) SetPlan(p DashScopePlan) {
	f.mu.Lock()
	f.plan = p
	f.mu.Unlock()
}

// Fail scripts the next submissions to fail, in order.
func (f *DashScope) Fail(s ...DashScopeFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (f *DashScope) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

// Count counts the requests received with method whose path starts with
// prefix.
func (f *DashScope) Count(method, prefix string) int {
	return countRequests(f.Requests(), method, prefix)
}

// Status is task id's status ("" for an unknown task).
func (f *DashScope) Status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tasks[id]; t != nil {
		return t.status
	}
	return ""
}

func dashError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"request_id": "req-fake", "code": code, "message": msg})
}

func (f *DashScope) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	if rest, ok := strings.CutPrefix(r.URL.Path, "/oss/"); ok && r.Method == http.MethodGet {
		f.object(w, rest)
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimPrefix(auth, "Bearer ") != f.key {
		dashError(w, http.StatusUnauthorized, "InvalidApiKey", "Invalid API-key provided.")
		return
	}
	const services = "/api/v1/services/aigc/"
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == services+"image2image/image-synthesis" || r.URL.Path == services+"text2image/image-synthesis"):
		f.create(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, services), "/image-synthesis"), body)
	case r.Method == http.MethodPost && r.URL.Path == services+"multimodal-generation/generation":
		f.generate(w, r, body)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v1/tasks/") && strings.HasSuffix(r.URL.Path, "/cancel"):
		f.cancel(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/tasks/"), "/cancel"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/tasks/"):
		f.query(w, strings.TrimPrefix(r.URL.Path, "/api/v1/tasks/"))
	default:
		dashError(w, http.StatusNotFound, "NotFound", "Not Found")
	}
}

func (f *DashScope) create(w http.ResponseWriter, r *http.Request, service string, body []byte) {
	if fail, ok := takeFailure(&f.mu, &f.failures); ok {
		msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
		dashError(w, fail.Status, fail.Code, msg)
		return
	}
	if r.Header.Get("X-DashScope-Async") != "enable" {
		dashError(w, http.StatusForbidden, "AccessDenied", "current user api does not support synchronous calls")
		return
	}
	var in struct {
		Model string `json:"model"`
		Input struct {
			Prompt         *string  `json:"prompt"`
			NegativePrompt *string  `json:"negative_prompt"`
			Images         []string `json:"images"`
		} `json:"input"`
		Parameters struct {
			Size         *string `json:"size"`
			N            *int    `json:"n"`
			PromptExtend *bool   `json:"prompt_extend"`
			Watermark    *bool   `json:"watermark"`
			Seed         *int64  `json:"seed"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		dashError(w, http.StatusBadRequest, "InvalidParameter", "The request body is not a valid JSON object: "+err.Error())
		return
	}
	want, known := dashModels[in.Model]
	n := 1
	if in.Parameters.N != nil {
		n = *in.Parameters.N
	}
	switch {
	case in.Model == "":
		dashError(w, http.StatusBadRequest, "InvalidParameter", "Model not exist.")
		return
	case !known:
		dashError(w, http.StatusNotFound, "ModelNotFound", "Model not found ("+in.Model+")!")
		return
	case want != service:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "Model "+in.Model+" is not supported by "+service)
		return
	case in.Input.Prompt == nil || *in.Input.Prompt == "":
		dashError(w, http.StatusBadRequest, "InvalidParameter", "Field required: input.prompt")
		return
	case service == "image2image" && (len(in.Input.Images) < 1 || len(in.Input.Images) > 3):
		dashError(w, http.StatusBadRequest, "InvalidParameter", "input.images must contain 1 to 3 images")
		return
	case service == "text2image" && len(in.Input.Images) > 0:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "input.images is not supported by "+in.Model)
		return
	case n < 1 || n > 4:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "parameters.n must be between 1 and 4")
		return
	}
	for _, u := range in.Input.Images {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "data:image/") {
			dashError(w, http.StatusBadRequest, "InvalidParameter.DataInspection", "The image URL is invalid: "+u)
			return
		}
	}
	if s := in.Parameters.Size; s != nil {
		m := dashSize.FindStringSubmatch(*s)
		if m == nil {
			dashError(w, http.StatusBadRequest, "InvalidParameter", "The size is not match the allowed size ["+*s+"]")
			return
		}
		wd, _ := strconv.Atoi(m[1])
		ht, _ := strconv.Atoi(m[2])
		if wd*ht < 384*384 || wd*ht > 2048*2048 {
			dashError(w, http.StatusBadRequest, "InvalidParameter", "The size is not match the allowed size ["+*s+"]")
			return
		}
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("%08x-5ff8-4d82-bcb6-%012x", f.seq, f.seq)
	f.tasks[id] = &dashTask{id: id, model: in.Model, n: n, status: "PENDING", plan: f.plan, submitted: time.Now()}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"request_id": "req-" + id,
		"output": map[string]any{"task_id": id, "task_status": "PENDING"}})
}

func (f *DashScope) query(w http.ResponseWriter, id string) {
	f.mu.Lock()
	t := f.tasks[id]
	if t == nil {
		f.mu.Unlock()
		// DashScope answers an unknown (or expired) task with UNKNOWN, not 404.
		writeJSON(w, http.StatusOK, map[string]any{"request_id": "req-fake",
			"output": map[string]any{"task_id": id, "task_status": "UNKNOWN"}})
		return
	}
	t.polls++
	p := t.plan
	if t.polls <= p.RateLimited {
		f.mu.Unlock()
		if p.RetryAfter != "" {
			w.Header().Set("Retry-After", p.RetryAfter)
		}
		dashError(w, http.StatusTooManyRequests, "Throttling.RateQuota", "Requests rate limit exceeded, please try again later.")
		return
	}
	k := t.polls - p.RateLimited
	if t.status == "PENDING" || t.status == "RUNNING" {
		switch {
		case k == 1 && p.Polls > 0:
			t.status = "PENDING"
		case k <= p.Polls:
			t.status = "RUNNING"
		case p.FailCode != "" || p.FailMessage != "":
			t.status = "FAILED"
		default:
			t.status = "SUCCEEDED"
		}
	}
	out := map[string]any{"task_id": t.id, "task_status": t.status,
		"submit_time": t.submitted.Format("2006-01-02 15:04:05.000")}
	resp := map[string]any{"request_id": "req-" + t.id, "output": out}
	switch t.status {
	case "SUCCEEDED":
		var results []map[string]any
		for i := range t.n {
			results = append(results, map[string]any{"url": fmt.Sprintf("%s/oss/%s/%d.png?Expires=%d&Signature=fake", f.URL, t.id, i, time.Now().Add(24*time.Hour).Unix())})
		}
		out["results"] = results
		out["end_time"] = time.Now().Format("2006-01-02 15:04:05.000")
		out["task_metrics"] = map[string]any{"TOTAL": t.n, "SUCCEEDED": t.n, "FAILED": 0}
		resp["usage"] = map[string]any{"image_count": t.n}
	case "FAILED":
		out["code"], out["message"] = p.FailCode, p.FailMessage
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

func (f *DashScope) cancel(w http.ResponseWriter, id string) {
	f.mu.Lock()
	t := f.tasks[id]
	var status string
	if t != nil {
		status = t.status
		if status == "PENDING" {
			t.status = "CANCELED"
		}
	}
	f.mu.Unlock()
	switch {
	case t == nil:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "task_id not found")
	case status != "PENDING":
		dashError(w, http.StatusBadRequest, "UnsupportedOperation", "Failed to cancel the task, please confirm if the task is in PENDING status.")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"request_id": "req-" + id})
	}
}

// object serves a finished task's image, as OSS would.
func (f *DashScope) object(w http.ResponseWriter, rest string) {
	id, file, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(strings.TrimSuffix(file, ".png"))
	f.mu.Lock()
	t := f.tasks[id]
	ok := t != nil && t.status == "SUCCEEDED" && err == nil && i >= 0 && i < t.n
	f.mu.Unlock()
	if !ok {
		http.Error(w, "NoSuchKey", http.StatusNotFound)
		return
	}
	data, ctype := DefaultOutput("image", i)
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(data)
}

// generate is the synchronous multimodal-generation service of the
// qwen-image-edit models (Model Studio's "Qwen - image editing API
// reference"): one user message whose content is 1 to 3 {"image"} items
// (URL or data URI) and exactly one {"text"}, parameters.n 1 to 6 (1 for
// qwen-image-edit), parameters.size "W*H" with each side in [512, 2048].
// The answer is {"output": {"choices": [{"finish_reason": "stop",
// "message": {"role": "assistant", "content": [{"image"}, …]}}]}, "usage":
// {"width", "height", "image_count"}, "request_id"}; the images are served
// under /oss/ like the task API's. The plan's FailCode makes the service
// refuse the edit (HTTP 400 with that code), as it does for content
// inspection; the service has no task, so X-DashScope-Async is refused.
func (f *DashScope) generate(w http.ResponseWriter, r *http.Request, body []byte) {
	if fail, ok := takeFailure(&f.mu, &f.failures); ok {
		msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
		dashError(w, fail.Status, fail.Code, msg)
		return
	}
	if r.Header.Get("X-DashScope-Async") == "enable" {
		dashError(w, http.StatusForbidden, "AccessDenied", "current user api does not support asynchronous calls")
		return
	}
	var in struct {
		Model string `json:"model"`
		Input struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Image *string `json:"image"`
					Text  *string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		} `json:"input"`
		Parameters struct {
			N    *int    `json:"n"`
			Size *string `json:"size"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		dashError(w, http.StatusBadRequest, "InvalidParameter", "The request body is not a valid JSON object: "+err.Error())
		return
	}
	switch service, known := dashModels[in.Model]; {
	case in.Model == "":
		dashError(w, http.StatusBadRequest, "InvalidParameter", "Model not exist.")
		return
	case !known:
		dashError(w, http.StatusNotFound, "ModelNotFound", "Model not found ("+in.Model+")!")
		return
	case service != "multimodal-generation":
		dashError(w, http.StatusBadRequest, "InvalidParameter", "Model "+in.Model+" is not supported by multimodal-generation")
		return
	case len(in.Input.Messages) != 1 || in.Input.Messages[0].Role != "user":
		dashError(w, http.StatusBadRequest, "InvalidParameter", "input.messages must hold exactly one user message")
		return
	}
	var images, texts int
	for _, c := range in.Input.Messages[0].Content {
		switch {
		case c.Image != nil:
			u := *c.Image
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "data:image/") {
				dashError(w, http.StatusBadRequest, "InvalidParameter.DataInspection", "The image URL is invalid: "+u)
				return
			}
			images++
		case c.Text != nil && *c.Text != "":
			texts++
		default:
			dashError(w, http.StatusBadRequest, "InvalidParameter", "each content item must be an image or a text")
			return
		}
	}
	n := 1
	if in.Parameters.N != nil {
		n = *in.Parameters.N
	}
	maxN := 6
	if in.Model == "qwen-image-edit" {
		maxN = 1
	}
	switch {
	case images < 1 || images > 3:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "the content must hold 1 to 3 images")
		return
	case texts != 1:
		dashError(w, http.StatusBadRequest, "InvalidParameter", "the content must hold exactly one text")
		return
	case n < 1 || n > maxN:
		dashError(w, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("parameters.n must be between 1 and %d", maxN))
		return
	}
	width, height := 1024, 1024
	if s := in.Parameters.Size; s != nil {
		m := dashSize.FindStringSubmatch(*s)
		if m != nil {
			width, _ = strconv.Atoi(m[1])
			height, _ = strconv.Atoi(m[2])
		}
		if m == nil || width < 512 || width > 2048 || height < 512 || height > 2048 {
			dashError(w, http.StatusBadRequest, "InvalidParameter", "The size is not match the allowed size ["+*s+"]")
			return
		}
	}
	f.mu.Lock()
	p := f.plan
	if p.FailCode != "" || p.FailMessage != "" {
		f.mu.Unlock()
		dashError(w, http.StatusBadRequest, p.FailCode, p.FailMessage)
		return
	}
	f.seq++
	id := fmt.Sprintf("%08x-5ff8-4d82-bcb6-%012x", f.seq, f.seq)
	// Kept as a finished task only so that /oss/ serves its images.
	f.tasks[id] = &dashTask{id: id, model: in.Model, n: n, status: "SUCCEEDED", submitted: time.Now()}
	f.mu.Unlock()
	content := make([]map[string]any, 0, n)
	for i := range n {
		content = append(content, map[string]any{"image": fmt.Sprintf("%s/oss/%s/%d.png?Expires=%d&Signature=fake", f.URL, id, i, time.Now().Add(24*time.Hour).Unix())})
	}
	writeJSON(w, http.StatusOK, map[string]any{"request_id": "req-" + id,
		"output": map[string]any{"choices": []any{map[string]any{"finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}}},
		"usage": map[string]any{"width": width, "height": height, "image_count": n}})
}
