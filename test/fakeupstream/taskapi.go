package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TaskAPI is a fake of the gateway's own asynchronous task API (the
// contract's POST /v1/{images|videos}/generations and GET …/{task_id}), as
// another modelgate or a compatible aggregator serves it. It requires
// Authorization: Bearer Key(), validates the request's model and prompt,
// replays a submission whose client_business_id (or Idempotency-Key header)
// it has seen, advances every task one step per poll according to its
// TaskPlan, and serves the outputs itself under /files/ with short-lived
// links. Submissions can be made to fail (FailSubmits) and polls to be rate
// limited with Retry-After.
type TaskAPI struct {
	*httptest.Server

	mu          sync.Mutex
	key         string
	plan        TaskPlan
	failures    []SubmitFailure
	tasks       map[string]*fakeTask
	replays     map[string]string
	reqs        []Request
	submissions int
	polls       int
	seq         int
}

// TaskPlan is how the fake runs the tasks submitted after it is set.
type TaskPlan struct {
	// Polls is how many polls answer in_progress (with growing progress)
	// before the task is final; 0: final at the first poll.
	Polls int
	// RateLimited is how many of each task's first polls answer 429 with
	// Retry-After (before the in_progress ones).
	RateLimited int
	// RetryAfter is that header's value (delay seconds or an HTTP date);
	// default "1".
	RetryAfter string
	// Fail, when set, makes the task fail with this message.
	Fail string
	// FailCode is that failure's error code; default generation_failed.
	FailCode string
	// Output is the bytes of each output, ContentType their type; default
	// a small PNG (image tasks) or a small MP4 header (video tasks).
	Output      []byte
	ContentType string
	// Outputs is the number of outputs of an image task (default the
	// request's n, else 1); a video task has one.
	Outputs int
	// ReportSeconds, when positive, is reported as the video's "duration"
	// (an extension some aggregators have; the contract has no such field).
	ReportSeconds int64
}

// SubmitFailure scripts the answer to one submission attempt.
type SubmitFailure struct {
	// Status is the HTTP status (with the contract's error body).
	Status int
	// Message is the error message; default the status text.
	Message string
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Reset closes the connection without an answer.
	Reset bool
}

type fakeTask struct {
	id, kind, model string
	plan            TaskPlan
	created         int64
	outputs         int
	polls           int
	done            int64 // completion time, Unix seconds
}

// NewTaskAPI starts the fake.
func NewTaskAPI() *TaskAPI {
	f := &TaskAPI{key: DefaultKey, tasks: map[string]*fakeTask{}, replays: map[string]string{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *TaskAPI) Key() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key
}

// SetPlan sets the plan of tasks submitted from now on.
func (f *TaskAPI) SetPlan(p TaskPlan) {
	f.mu.Lock()
	f.plan = p
	f.mu.Unlock()
}

// FailSubmits scripts the next submission attempts to fail, in order.
func (f *TaskAPI) FailSubmits(s ...SubmitFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// Submissions counts the tasks the fake accepted (replays not included).
func (f *TaskAPI) Submissions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submissions
}

// Polls counts task queries (rate-limited ones included).
func (f *TaskAPI) Polls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

// Requests returns copies of the requests received so far.
func (f *TaskAPI) Requests() []Request {
	return cloneRequests(&f.mu, &f.reqs)
}

// DefaultOutput is what a task of kind ("image" or "video") produces when
// its plan sets no Output, and its content type.
func DefaultOutput(kind string, i int) ([]byte, string) {
	if kind == "video" {
		// An ISO BMFF file type box, then filler: enough for a type sniffer.
		b := []byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom")
		return append(b, bytes.Repeat([]byte{byte(i)}, 64)...), "video/mp4"
	}
	return PNG(8, 8, uint8(40*i)), "image/png"
}

// PNG encodes a small solid image.
func PNG(w, h int, shade uint8) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: shade, G: uint8(x * 16), B: uint8(y * 16), A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

func (f *TaskAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/files/") {
		f.file(w, r)
		return
	}
	kind, rest, ok := taskPath(r.URL.Path)
	if !ok {
		taskError(w, http.StatusNotFound, "not_found_error", "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	if auth := r.Header.Get("Authorization"); auth != "Bearer "+f.Key() {
		taskError(w, http.StatusUnauthorized, "authentication_error", "invalid or missing API key")
		return
	}
	switch {
	case r.Method == http.MethodPost && rest == "":
		f.submit(w, r, kind, body)
	case r.Method == http.MethodGet && rest != "":
		f.poll(w, kind, rest)
	default:
		taskError(w, http.StatusMethodNotAllowed, "invalid_request", "method not allowed")
	}
}

// taskPath splits /v1/{images|videos}/generations[/id].
func taskPath(p string) (kind, id string, ok bool) {
	for _, k := range []string{"image", "video"} {
		prefix := "/v1/" + k + "s/generations"
		if p == prefix {
			return k, "", true
		}
		if strings.HasPrefix(p, prefix+"/") {
			return k, strings.TrimPrefix(p, prefix+"/"), true
		}
	}
	return "", "", false
}

func (f *TaskAPI) submit(w http.ResponseWriter, r *http.Request, kind string, body []byte) {
	if fail, ok := takeFailure(&f.mu, &f.failures); ok {
		msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
		taskError(w, fail.Status, errorTypeFor(fail.Status), msg)
		return
	}
	var req struct {
		Model            string          `json:"model"`
		Prompt           string          `json:"prompt"`
		N                int             `json:"n"`
		ClientBusinessID string          `json:"client_business_id"`
		ImageWithRoles   json.RawMessage `json:"image_with_roles"`
		ReferenceImages  json.RawMessage `json:"reference_images"`
		VideoList        json.RawMessage `json:"video_list"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		taskError(w, http.StatusBadRequest, "invalid_request", "the body is not valid JSON: "+err.Error())
		return
	}
	switch {
	case req.Model == "":
		taskError(w, http.StatusBadRequest, "invalid_request", "model is required")
		return
	case kind == "image" && strings.TrimSpace(req.Prompt) == "":
		taskError(w, http.StatusBadRequest, "invalid_request", "prompt is required")
		return
	case kind == "video" && req.Prompt == "" && len(req.ImageWithRoles) == 0 && len(req.ReferenceImages) == 0 && len(req.VideoList) == 0:
		taskError(w, http.StatusBadRequest, "invalid_request", "a prompt or media assets are required")
		return
	}
	replay := req.ClientBusinessID
	if replay == "" {
		replay = r.Header.Get("Idempotency-Key")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.replays[kind+"\x00"+replay]; ok && replay != "" {
		writeJSON(w, http.StatusOK, f.render(f.tasks[id]))
		return
	}
	f.seq++
	f.submissions++
	t := &fakeTask{id: fmt.Sprintf("task_up%019d", f.seq), kind: kind, model: req.Model, plan: f.plan,
		created: time.Now().Unix(), outputs: 1}
	if kind == "image" {
		switch {
		case f.plan.Outputs > 0:
			t.outputs = f.plan.Outputs
		case req.N > 0:
			t.outputs = req.N
		}
	}
	f.tasks[t.id] = t
	if replay != "" {
		f.replays[kind+"\x00"+replay] = t.id
	}
	writeJSON(w, http.StatusOK, f.render(t))
}

func (f *TaskAPI) poll(w http.ResponseWriter, kind, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	t, ok := f.tasks[id]
	if !ok || t.kind != kind {
		taskError(w, http.StatusNotFound, "task_not_found", "task "+id+" not found")
		return
	}
	t.polls++
	if t.polls <= t.plan.RateLimited {
		ra := t.plan.RetryAfter
		if ra == "" {
			ra = "1"
		}
		w.Header().Set("Retry-After", ra)
		taskError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "too many task queries")
		return
	}
	if t.polls-t.plan.RateLimited > t.plan.Polls && t.done == 0 {
		t.done = time.Now().Unix()
	}
	writeJSON(w, http.StatusOK, f.render(t))
}

// render is the contract's task object; the caller holds f.mu.
func (f *TaskAPI) render(t *fakeTask) map[string]any {
	o := map[string]any{"id": t.id, "object": "generation.task", "model": t.model, "created_at": t.created}
	step := t.polls - t.plan.RateLimited
	switch {
	case t.done != 0 && t.plan.Fail != "":
		o["status"], o["progress"] = "failed", 0
		code := t.plan.FailCode
		if code == "" {
			code = "generation_failed"
		}
		o["error"] = map[string]any{"code": code, "message": t.plan.Fail}
	case t.done != 0:
		o["status"], o["progress"] = "completed", 100
		o["completed_at"], o["expires_at"] = t.done, t.done+24*3600
		var data []map[string]any
		for i := range t.outputs {
			data = append(data, map[string]any{"url": fmt.Sprintf("%s/files/%s/%d?expires=%d", f.URL, t.id, i, t.done+3600)})
		}
		o["result"] = map[string]any{"type": t.kind, "data": data}
		o["url"] = data[0]["url"]
		if t.plan.ReportSeconds > 0 {
			o["duration"] = t.plan.ReportSeconds
		}
	case step <= 0:
		o["status"], o["progress"] = "queued", 0
	default:
		o["status"], o["progress"] = "in_progress", step*100/(t.plan.Polls+1)
	}
	if t.polls == 0 && t.done == 0 {
		o["metadata"] = map[string]any{}
	}
	return o
}

// file serves /files/{task}/{i}?expires=… until the link expires.
func (f *TaskAPI) file(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	exp, _ := strconv.ParseInt(r.URL.Query().Get("expires"), 10, 64)
	f.mu.Lock()
	var t *fakeTask
	if len(parts) == 2 {
		t = f.tasks[parts[0]]
	}
	f.mu.Unlock()
	i, err := strconv.Atoi(parts[len(parts)-1])
	if t == nil || t.done == 0 || err != nil || i < 0 || i >= t.outputs {
		http.NotFound(w, r)
		return
	}
	if exp < time.Now().Unix() {
		http.Error(w, "this link has expired", http.StatusForbidden)
		return
	}
	data, ctype := t.plan.Output, t.plan.ContentType
	if data == nil {
		data, ctype = DefaultOutput(t.kind, i)
	}
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// taskError writes the gateway's common error shape.
func taskError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "type": typ}})
}

func errorTypeFor(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusPaymentRequired:
		return "insufficient_quota"
	case status == http.StatusUnprocessableEntity:
		return "content_policy_violation"
	case status >= 500:
		return "internal_error"
	}
	return "invalid_request"
}

// takeFailure pops the next scripted failure of a fake, under mu.
func takeFailure[T any](mu *sync.Mutex, queue *[]T) (T, bool) {
	mu.Lock()
	defer mu.Unlock()
	var none T
	if len(*queue) == 0 {
		return none, false
	}
	next := (*queue)[0]
	*queue = (*queue)[1:]
	return next, true
}

// beginFailure plays the transport part of a scripted failure (a reset
// connection, a Retry-After header) and returns the error message to send:
// message, or the status text.
func beginFailure(w http.ResponseWriter, status int, message, retryAfter string, reset bool) string {
	if reset {
		panic(http.ErrAbortHandler)
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if message == "" {
		return http.StatusText(status)
	}
	return message
}
