package fakeupstream

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// OpenAIVideos is a fake of OpenAI's Videos API (Sora), written from the API
// reference (developers.openai.com/api/reference/resources/videos) and the
// openai-go SDK's video types: POST /v1/videos (JSON or multipart:
// prompt required; model sora-2 (default) or sora-2-pro and their dated
// snapshots; seconds "4", "8" or "12" as a string; size from the model's
// list; input_reference a file part or {"image_url"|"file_id"}), GET
// /v1/videos/{id} (the video object: status queued → in_progress with a
// rising progress → completed or failed with error {code, message}), GET
// /v1/videos/{id}/content (the MP4 once completed) and DELETE
// /v1/videos/{id} (video.deleted). It requires Authorization: Bearer Key().
// VideoPlan scripts each video's course; ImageFailure scripts submission
// answers.
type OpenAIVideos struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	plan     VideoPlan
	failures []ImageFailure
	videos   map[string]*fakeVideo
	reqs     []Request
	seq      int
}

// VideoPlan scripts every video submitted after it is set.
type VideoPlan struct {
	// Polls is how many status queries answer queued/in_progress before the
	// final state (the first answers queued).
	Polls int
	// RateLimited is how many of the first status queries answer 429 with
	// RetryAfter.
	RateLimited int
	RetryAfter  string
	// FailCode and FailMessage make the video fail (e.g.
	// moderation_blocked) instead of completing.
	FailCode, FailMessage string
	// Output is the MP4 served by /content (default DefaultOutput("video")).
	Output []byte
}

type fakeVideo struct {
	obj     map[string]any
	polls   int
	plan    VideoPlan
	deleted bool
}

var videoSizes = map[string][]string{
	"sora-2":     {"720x1280", "1280x720"},
	"sora-2-pro": {"720x1280", "1280x720", "1024x1792", "1792x1024"},
}

// NewOpenAIVideos starts the fake.
func NewOpenAIVideos() *OpenAIVideos {
	f := &OpenAIVideos{key: DefaultKey, videos: map[string]*fakeVideo{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *OpenAIVideos) Key() string { return f.key }

// SetPlan sets the course of the videos submitted from now on.
func (f *OpenAIVideos) SetPlan(p VideoPlan) {
	f.mu.Lock()
	f.plan = p
	f.mu.Unlock()
}

// Fail scripts the next submissions to fail, in order.
func (f *OpenAIVideos) Fail(s ...ImageFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (f *OpenAIVideos) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

// Count counts the requests received with method whose path starts with
// prefix.
func (f *OpenAIVideos) Count(method, prefix string) int {
	return countRequests(f.Requests(), method, prefix)
}

// Deleted reports whether video id was deleted.
func (f *OpenAIVideos) Deleted(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.videos[id]
	return v != nil && v.deleted
}

func (f *OpenAIVideos) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimPrefix(auth, "Bearer ") != f.key {
		imageError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.", "")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/videos")
	switch {
	case ok && rest == "" && r.Method == http.MethodPost:
		f.create(w, r, body)
	case ok && strings.HasPrefix(rest, "/") && strings.HasSuffix(rest, "/content") && r.Method == http.MethodGet:
		f.content(w, strings.TrimSuffix(rest[1:], "/content"))
	case ok && strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/") && r.Method == http.MethodGet:
		f.retrieve(w, rest[1:])
	case ok && strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/") && r.Method == http.MethodDelete:
		f.delete(w, rest[1:])
	default:
		imageError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
	}
}

// form reads the create request's fields: JSON, or multipart with an
// optional input_reference file part.
func form(r *http.Request, body []byte) (map[string]any, string) {
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	out := map[string]any{}
	switch ct {
	case "application/json":
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, "We could not parse the JSON body of your request."
		}
	case "multipart/form-data":
		mr := multipart.NewReader(strings.NewReader(string(body)), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, "Could not parse multipart form."
			}
			data, _ := io.ReadAll(p)
			if p.FileName() != "" {
				out[p.FormName()] = map[string]any{"file": len(data)}
			} else {
				out[p.FormName()] = string(data)
			}
		}
	default:
		return nil, "Unsupported content type: '" + ct + "'. This API method only accepts 'application/json' and 'multipart/form-data' requests."
	}
	return out, ""
}

func (f *OpenAIVideos) create(w http.ResponseWriter, r *http.Request, body []byte) {
	if fail, ok := takeFailure(&f.mu, &f.failures); ok {
		msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
		typ := fail.Type
		if typ == "" {
			typ = openAIErrorType(fail.Status)
		}
		imageError(w, fail.Status, typ, fail.Code, msg, "")
		return
	}
	in, msg := form(r, body)
	if msg != "" {
		imageError(w, http.StatusBadRequest, "invalid_request_error", "", msg, "")
		return
	}
	str := func(k string) (string, bool) {
		v, present := in[k]
		s, ok := v.(string)
		return s, ok || !present
	}
	prompt, _ := str("prompt")
	model, okModel := str("model")
	seconds, okSeconds := str("seconds")
	size, okSize := str("size")
	switch {
	case prompt == "":
		imageError(w, http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "Missing required parameter: 'prompt'.", "prompt")
		return
	case !okModel || !okSeconds || !okSize:
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_type", "Invalid type: model, seconds and size must be strings.", "")
		return
	}
	if model == "" {
		model = "sora-2"
	}
	base := model
	if i := strings.Index(model, "-20"); i > 0 {
		base = model[:i] // dated snapshot
	}
	sizes, known := videoSizes[base]
	if seconds == "" {
		seconds = "4"
	}
	if size == "" {
		size = "720x1280"
	}
	switch {
	case !known:
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: 'sora-2' and 'sora-2-pro'.", model), "model")
		return
	case !slices.Contains([]string{"4", "8", "12"}, seconds):
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: '4', '8', and '12'.", seconds), "seconds")
		return
	case !slices.Contains(sizes, size):
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: '%s'.", size, strings.Join(sizes, "', '")), "size")
		return
	}
	if ref, ok := in["input_reference"]; ok {
		m, _ := ref.(map[string]any)
		_, file := m["file"]
		u, _ := m["image_url"].(string)
		id, _ := m["file_id"].(string)
		if !file && u == "" && id == "" {
			imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value",
				"Invalid 'input_reference': provide a file, or an object with image_url or file_id.", "input_reference")
			return
		}
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("video_%032x", f.seq)
	obj := map[string]any{"id": id, "object": "video", "created_at": time.Now().Unix(), "completed_at": nil, "expires_at": nil,
		"model": model, "prompt": prompt, "progress": 0, "remixed_from_video_id": nil, "seconds": seconds, "size": size,
		"status": "queued", "error": nil}
	f.videos[id] = &fakeVideo{obj: obj, plan: f.plan}
	out, _ := json.Marshal(obj)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (f *OpenAIVideos) notFound(w http.ResponseWriter, id string) {
	imageError(w, http.StatusNotFound, "invalid_request_error", "video_not_found", fmt.Sprintf("Video with id '%s' not found.", id), "")
}

func (f *OpenAIVideos) retrieve(w http.ResponseWriter, id string) {
	f.mu.Lock()
	v := f.videos[id]
	if v == nil || v.deleted {
		f.mu.Unlock()
		f.notFound(w, id)
		return
	}
	v.polls++
	p := v.plan
	if v.polls <= p.RateLimited {
		f.mu.Unlock()
		if p.RetryAfter != "" {
			w.Header().Set("Retry-After", p.RetryAfter)
		}
		imageError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached for requests.", "")
		return
	}
	n := v.polls - p.RateLimited
	switch {
	case n == 1 && p.Polls > 0:
		v.obj["status"] = "queued"
	case n <= p.Polls:
		v.obj["status"], v.obj["progress"] = "in_progress", 100*(n-1)/p.Polls
	case p.FailCode != "" || p.FailMessage != "":
		v.obj["status"], v.obj["progress"] = "failed", 0
		v.obj["error"] = map[string]any{"code": p.FailCode, "message": p.FailMessage}
	default:
		v.obj["status"], v.obj["progress"] = "completed", 100
		v.obj["completed_at"] = time.Now().Unix()
		v.obj["expires_at"] = time.Now().Add(time.Hour).Unix()
	}
	out, _ := json.Marshal(v.obj)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (f *OpenAIVideos) content(w http.ResponseWriter, id string) {
	f.mu.Lock()
	v := f.videos[id]
	var status string
	var data []byte
	if v != nil {
		status, _ = v.obj["status"].(string)
		data = v.plan.Output
	}
	f.mu.Unlock()
	switch {
	case v == nil || v.deleted:
		f.notFound(w, id)
		return
	case status != "completed":
		imageError(w, http.StatusBadRequest, "invalid_request_error", "video_not_ready",
			"Video is not ready yet, use GET /v1/videos/{video_id} to check status.", "")
		return
	}
	if data == nil {
		data, _ = DefaultOutput("video", 0)
	}
	w.Header().Set("Content-Type", "video/mp4")
	_, _ = w.Write(data)
}

func (f *OpenAIVideos) delete(w http.ResponseWriter, id string) {
	f.mu.Lock()
	v := f.videos[id]
	if v != nil {
		v.deleted = true
	}
	f.mu.Unlock()
	if v == nil {
		f.notFound(w, id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "video.deleted", "deleted": true})
}
