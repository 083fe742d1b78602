package fakeupstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BFL is a fake of Black Forest Labs' API for FLUX Kontext, written from
// its API reference (docs.bfl.ml/api-reference/models/edit-or-create-an-
// image-with-flux-kontext-pro and /api-reference/utility/get-result):
// POST /v1/flux-kontext-pro and /v1/flux-kontext-max (header x-key; JSON
// body: prompt required, input_image, seed, aspect_ratio between 21:9 and
// 9:21, output_format jpeg or png, prompt_upsampling, safety_tolerance 0 to
// 6, webhook_url, webhook_secret, input_image_2..4; a wrong field answers
// 422 with FastAPI's {"detail": [{loc, msg, type}]}) answering {"id",
// "polling_url", "cost", "input_mp", "output_mp"}; GET
// /v1/get_result?id= (header x-key) answering {"id", "status", "result",
// "progress", "details"} with status Pending → Ready (result.sample a signed
// URL), Request Moderated, Content Moderated, Error or Task not found; and
// GET /samples/{id}.{ext}?se=…&sig=… (the signed delivery URL, no key).
//
// Stricter than BFL: a body field BFL does not document is refused (422),
// so an adapter sending a wrong name is caught.
type BFL struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	plan     BFLPlan
	failures []BFLFailure
	tasks    map[string]*bflTask
	reqs     []Request
	seq      int
}

// BFLPlan scripts every task submitted after it is set.
type BFLPlan struct {
	// Polls is how many result queries answer Pending (with progress rising
	// from 0 towards 1) before the final status.
	Polls int
	// RateLimited is how many of the first result queries answer 429 with
	// RetryAfter.
	RateLimited int
	RetryAfter  string
	// Final is the last status: "" or Ready, Request Moderated, Content
	// Moderated, Error.
	Final string
	// Output is the sample served (default DefaultOutput("image")).
	Output []byte
}

// BFLFailure is one scripted answer to a submission.
type BFLFailure struct {
	Status     int
	Detail     string
	RetryAfter string
}

type bflTask struct {
	plan   BFLPlan
	polls  int
	format string
	prompt string
	seed   int64
}

var bflModels = map[string]bool{"flux-kontext-pro": true, "flux-kontext-max": true}

// bflFields are the documented body fields of the Kontext endpoints.
var bflFields = map[string]bool{"prompt": true, "input_image": true, "input_image_2": true, "input_image_3": true,
	"input_image_4": true, "seed": true, "aspect_ratio": true, "output_format": true, "webhook_url": true,
	"webhook_secret": true, "prompt_upsampling": true, "safety_tolerance": true}

// NewBFL starts the fake.
func NewBFL() *BFL {
	f := &BFL{key: DefaultKey, tasks: map[string]*bflTask{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *BFL) Key() string { return f.key }

// SetPlan sets the course of the tasks submitted from now on.
func (f *BFL) SetPlan(p BFLPlan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = p
}

// FailSubmits makes the next submissions answer these failures, in order.
func (f *BFL) FailSubmits(fs ...BFLFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fs...)
}

// Requests returns the requests received so far.
func (f *BFL) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

// Count counts the requests of a method and path.
func (f *BFL) Count(method, path string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

func (f *BFL) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()

	if strings.HasPrefix(r.URL.Path, "/samples/") && r.Method == http.MethodGet {
		f.sample(w, r)
		return
	}
	if r.Header.Get("x-key") != f.key {
		writeJSON(w, http.StatusForbidden, map[string]any{"detail": "Not authenticated"})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/get_result":
		f.result(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/"):
		f.submit(w, r, strings.TrimPrefix(r.URL.Path, "/v1/"), body)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	}
}

func bflInvalid(w http.ResponseWriter, field, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any{
		{"loc": []string{"body", field}, "msg": msg, "type": "value_error"}}})
}

func (f *BFL) submit(w http.ResponseWriter, r *http.Request, model string, body []byte) {
	if !bflModels[model] {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return
	}
	f.mu.Lock()
	if len(f.failures) > 0 {
		fl := f.failures[0]
		f.failures = f.failures[1:]
		f.mu.Unlock()
		if fl.RetryAfter != "" {
			w.Header().Set("Retry-After", fl.RetryAfter)
		}
		writeJSON(w, fl.Status, map[string]any{"detail": fl.Detail})
		return
	}
	f.mu.Unlock()
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		bflInvalid(w, "body", "JSON decode error")
		return
	}
	for k := range in {
		if !bflFields[k] {
			bflInvalid(w, k, "Extra inputs are not permitted")
			return
		}
	}
	var v struct {
		Prompt           *string `json:"prompt"`
		InputImage       *string `json:"input_image"`
		Seed             *int64  `json:"seed"`
		AspectRatio      *string `json:"aspect_ratio"`
		OutputFormat     *string `json:"output_format"`
		PromptUpsampling *bool   `json:"prompt_upsampling"`
		SafetyTolerance  *int    `json:"safety_tolerance"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		bflInvalid(w, "body", "Input should be valid: "+err.Error())
		return
	}
	if v.Prompt == nil {
		bflInvalid(w, "prompt", "Field required")
		return
	}
	if v.AspectRatio != nil && !bflRatio(*v.AspectRatio) {
		bflInvalid(w, "aspect_ratio", "Aspect ratio must be between 21:9 and 9:21")
		return
	}
	format := "png"
	if v.OutputFormat != nil {
		if *v.OutputFormat != "jpeg" && *v.OutputFormat != "png" {
			bflInvalid(w, "output_format", "Input should be 'jpeg' or 'png'")
			return
		}
		format = *v.OutputFormat
	}
	if v.SafetyTolerance != nil && (*v.SafetyTolerance < 0 || *v.SafetyTolerance > 6) {
		bflInvalid(w, "safety_tolerance", "Input should be between 0 and 6")
		return
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("bfl-%08d-0000-4000-8000-000000000000", f.seq)
	t := &bflTask{plan: f.plan, format: format, prompt: *v.Prompt}
	if v.Seed != nil {
		t.seed = *v.Seed
	}
	f.tasks[id] = t
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "polling_url": f.URL + "/v1/get_result?id=" + id,
		"cost": 4.0, "input_mp": 0, "output_mp": 1.05})
}

// bflRatio reports a W:H ratio between 21:9 and 9:21.
func bflRatio(s string) bool {
	a, b, ok := strings.Cut(s, ":")
	w, err1 := strconv.ParseFloat(a, 64)
	h, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return false
	}
	return w/h <= 21.0/9+1e-9 && h/w <= 21.0/9+1e-9
}

func (f *BFL) result(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	f.mu.Lock()
	t, ok := f.tasks[id]
	if !ok {
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": "Task not found", "result": nil, "progress": nil, "details": nil})
		return
	}
	t.polls++
	n, p := t.polls, t.plan
	f.mu.Unlock()
	if n <= p.RateLimited {
		if p.RetryAfter != "" {
			w.Header().Set("Retry-After", p.RetryAfter)
		}
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"detail": "Rate limit exceeded"})
		return
	}
	n -= p.RateLimited
	if n <= p.Polls {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": "Pending", "result": nil,
			"progress": float64(n-1) / float64(p.Polls), "details": nil})
		return
	}
	switch p.Final {
	case "", "Ready":
		ext := map[string]string{"jpeg": "jpg", "png": "png"}[t.format]
		sample := fmt.Sprintf("%s/samples/%s.%s?se=%s&sig=fake", f.URL, id, ext, time.Now().Add(10*time.Minute).UTC().Format(time.RFC3339))
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": "Ready", "progress": nil, "details": nil,
			"result": map[string]any{"sample": sample, "prompt": t.prompt, "seed": t.seed, "start_time": 0, "end_time": 1, "duration": 1}})
	case "Error":
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": "Error", "result": nil, "progress": nil,
			"details": "Generation failed"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": p.Final, "result": nil, "progress": nil,
			"details": map[string]any{"Moderation Reasons": []string{"Derivative Works Filter"}}})
	}
}

func (f *BFL) sample(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/samples/")
	id, _, _ := strings.Cut(name, ".")
	f.mu.Lock()
	t, ok := f.tasks[id]
	f.mu.Unlock()
	if !ok || r.URL.Query().Get("sig") == "" {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	out := t.plan.Output
	if out == nil {
		out, _ = DefaultOutput("image", 1)
	}
	w.Header().Set("Content-Type", http.DetectContentType(out))
	_, _ = w.Write(out)
}
