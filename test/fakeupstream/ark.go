package fakeupstream

import (
	"encoding/base64"
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

// Ark is a fake of Volcengine Ark / BytePlus ModelArk, written from the
// BytePlus ModelArk API references (docs.byteplus.com/en/docs/ModelArk:
// image generation API, video generation API 1520757, common error codes
// 1299023):
//
// POST /api/v3/images/generations (Seedream, synchronous): model, prompt
// required; image a URL or an array of at most 14; size "1K"/"2K"/"4K" or
// WIDTHxHEIGHT with 1280x720 to 4096x4096 pixels in total and a ratio
// within 1/16 to 16; sequential_image_generation disabled (one image) or
// auto with sequential_image_generation_options.max_images 1 to 15 and
// references + max_images at most 15; response_format url or b64_json.
// The answer is {"model", "created", "data": [{"url", "size"} |
// {"b64_json", "size"}], "usage": {"generated_images", "output_tokens",
// "total_tokens"}} with width×height/256 output tokens per image (the
// figure Ark reports: 1760x2368 = 16280 tokens).
//
// POST /api/v3/contents/generations/tasks (Seedance): model and a nonempty
// content array of text, image_url, video_url and audio_url items with
// roles first_frame, last_frame, reference_image, reference_video,
// reference_audio (first/last frames cannot be mixed with reference media;
// a last frame needs a first frame); answers {"id": "cgt-…"}. GET
// …/tasks/{id} answers queued, running, then succeeded with
// content.video_url (served by the fake under /tos/, without the
// credential, like TOS's signed links) and usage.completion_tokens =
// total_tokens = width×height×fps×seconds/1024, or failed with error.code
// and error.message. DELETE …/tasks/{id} cancels a queued task (status
// cancelled), deletes a finished one, and refuses a running or cancelled
// one.
//
// Errors are {"error": {"code", "message", "param", "type"}}. It requires
// Authorization: Bearer Key(). The private asset library (the Volcengine
// OpenAPI, signed with an access key) is served at / (ark_assets.go). ArkPlan scripts each task's course,
// ArkFailure the answers to submissions.
type Ark struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	plan     ArkPlan
	failures []ArkFailure
	tasks    map[string]*arkTask
	images   map[string][]byte
	reqs     []Request
	seq      int
	lib      arkLibrary
}

// ArkPlan scripts the image generations and the video tasks submitted
// after it is set.
type ArkPlan struct {
	// Queued is how many queries of a video task answer queued, then
	// Polls how many answer running, before the final state.
	Queued, Polls int
	// RateLimited is how many of the first queries answer 429 with
	// RetryAfter.
	RateLimited int
	RetryAfter  string
	// FailCode and FailMessage fail the video task (e.g.
	// OutputVideoSensitiveContentDetected) instead of finishing it.
	FailCode, FailMessage string
	// Video is the finished video's content (default: DefaultOutput).
	Video []byte
	// Ratio is the ratio the model picks for ratio "adaptive" (default
	// 16:9); FPS the video's frame rate (default 24).
	Ratio string
	FPS   int
	// Images is how many images a group (sequential auto) yields (default
	// max_images); Refused marks image indexes the model withholds as
	// moderated.
	Images  int
	Refused map[int]bool
}

// ArkFailure scripts the answer to one submission (images or tasks).
type ArkFailure struct {
	Status     int
	Code       string // e.g. RateLimitExceeded.EndpointRPMExceeded, InputTextSensitiveContentDetected
	Message    string
	RetryAfter string
	Reset      bool
}

type arkTask struct {
	id, model, status string
	polls             int
	plan              ArkPlan
	ratio, resolution string
	duration          int
	created           time.Time
}

var arkImageModels = map[string]bool{
	"doubao-seedream-4-0-250828": true, "seedream-4-0-250828": true,
	"doubao-seedream-4-5-251128": true, "seedream-4-5-251128": true,
}

var arkVideoModels = map[string]bool{
	"doubao-seedance-1-0-pro-250528": true, "seedance-1-0-pro-250528": true,
	"doubao-seedance-1-5-pro-251215": true, "seedance-1-5-pro-251215": true,
	"doubao-seedance-2-0-260128": true, "dreamina-seedance-2-0-260128": true,
}

var arkPixels = regexp.MustCompile(`^([0-9]+)x([0-9]+)$`)

// NewArk starts the fake.
func NewArk() *Ark {
	f := &Ark{key: DefaultKey, tasks: map[string]*arkTask{}, images: map[string][]byte{},
		lib: arkLibrary{groups: map[string]string{}, assets: map[string]*arkAsset{}, fetched: map[string][]byte{}}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *Ark) Key() string { return f.key }

// SetPlan sets the course of what is submitted from now on.
func (f *Ark) SetPlan(p ArkPlan) {
	f.mu.Lock()
	f.plan = p
	f.mu.Unlock()
}

// Fail scripts the next submissions to fail, in order.
func (f *Ark) Fail(s ...ArkFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (f *Ark) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

// Count counts the requests received with method whose path starts with
// prefix.
func (f *Ark) Count(method, prefix string) int { return countRequests(f.Requests(), method, prefix) }

// Status is video task id's status ("" for an unknown or deleted task).
func (f *Ark) Status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tasks[id]; t != nil {
		return t.status
	}
	return ""
}

// ArkVideoTokens is the token count Ark bills for a video:
// width × height × fps × seconds / 1024.
func ArkVideoTokens(width, height, fps, seconds int) int64 {
	return int64(width) * int64(height) * int64(fps) * int64(seconds) / 1024
}

// ArkVideoSize is the pixel size of a Seedance video of a ratio at a
// resolution (480p, 720p, 1080p): the resolution and ratio table of the
// Seedance video generation API reference.
func ArkVideoSize(ratio, resolution string) (int, int) {
	sizes := map[string]map[string][2]int{
		"480p":  {"16:9": {864, 480}, "4:3": {736, 544}, "1:1": {640, 640}, "3:4": {544, 736}, "9:16": {480, 864}, "21:9": {960, 416}},
		"720p":  {"16:9": {1280, 720}, "4:3": {1112, 834}, "1:1": {960, 960}, "3:4": {834, 1112}, "9:16": {720, 1280}, "21:9": {1470, 630}},
		"1080p": {"16:9": {1920, 1080}, "4:3": {1664, 1248}, "1:1": {1440, 1440}, "3:4": {1248, 1664}, "9:16": {1080, 1920}, "21:9": {2206, 946}},
	}
	p := sizes[resolution][ratio]
	return p[0], p[1]
}

func arkError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg + " Request id: 0217" + strconv.FormatInt(time.Now().UnixNano(), 10),
		"param": "", "type": typ}})
}

func arkErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	}
	return "InternalServiceError"
}

func (f *Ark) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	if rest, ok := strings.CutPrefix(r.URL.Path, "/tos/"); ok && r.Method == http.MethodGet {
		f.object(w, rest)
		return
	}
	if r.URL.Path == "/" && r.URL.Query().Has("Action") {
		f.openAPI(w, r, body)
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimPrefix(auth, "Bearer ") != f.key {
		arkError(w, http.StatusUnauthorized, "Unauthorized", "AuthenticationError", "The API key or AK/SK in the request is missing or invalid.")
		return
	}
	const tasks = "/api/v3/contents/generations/tasks"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v3/images/generations":
		f.generateImages(w, body)
	case r.Method == http.MethodPost && r.URL.Path == tasks:
		f.createTask(w, body)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, tasks+"/"):
		f.queryTask(w, strings.TrimPrefix(r.URL.Path, tasks+"/"))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, tasks+"/"):
		f.deleteTask(w, strings.TrimPrefix(r.URL.Path, tasks+"/"))
	default:
		arkError(w, http.StatusNotFound, "NotFound", "NotFound", "The requested resource is not found.")
	}
}

// scripted plays the next scripted submission failure, if any.
func (f *Ark) scripted(w http.ResponseWriter) bool {
	fail, ok := takeFailure(&f.mu, &f.failures)
	if !ok {
		return false
	}
	msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
	arkError(w, fail.Status, arkErrorType(fail.Status), fail.Code, msg)
	return true
}

func invalidParam(w http.ResponseWriter, param, why string) {
	arkError(w, http.StatusBadRequest, "BadRequest", "InvalidParameter",
		fmt.Sprintf("The parameter `%s` specified in the request is not valid: %s.", param, why))
}

func (f *Ark) generateImages(w http.ResponseWriter, body []byte) {
	if f.scripted(w) {
		return
	}
	var in struct {
		Model      string          `json:"model"`
		Prompt     *string         `json:"prompt"`
		Image      json.RawMessage `json:"image"`
		Size       *string         `json:"size"`
		Sequential *string         `json:"sequential_image_generation"`
		SeqOptions *struct {
			MaxImages *int `json:"max_images"`
		} `json:"sequential_image_generation_options"`
		ResponseFormat *string `json:"response_format"`
		Stream         bool    `json:"stream"`
		Watermark      *bool   `json:"watermark"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		invalidParam(w, "body", "not a JSON object")
		return
	}
	switch {
	case in.Model == "":
		arkError(w, http.StatusBadRequest, "BadRequest", "MissingParameter", "The request failed because it is missing one or multiple required parameters: model.")
		return
	case !arkImageModels[in.Model]:
		arkError(w, http.StatusNotFound, "NotFound", "InvalidEndpointOrModel.NotFound", "The model or endpoint "+in.Model+" does not exist or you do not have access to it.")
		return
	case in.Prompt == nil || strings.TrimSpace(*in.Prompt) == "":
		arkError(w, http.StatusBadRequest, "BadRequest", "MissingParameter", "The request failed because it is missing one or multiple required parameters: prompt.")
		return
	case in.Stream:
		invalidParam(w, "stream", "the fake serves non-streaming generations only")
		return
	}
	refs, ok := arkImages(in.Image)
	if !ok || len(refs) > 14 {
		invalidParam(w, "image", "image must be a URL or an array of at most 14 URLs")
		return
	}
	width, height := 2048, 2048
	if in.Size != nil {
		var ok bool
		if width, height, ok = arkImageSize(*in.Size); !ok {
			invalidParam(w, "size", "size must be 1K, 2K, 4K or WIDTHxHEIGHT between 1280x720 and 4096x4096 pixels in total with a ratio within [1/16, 16]")
			return
		}
	}
	format := "url"
	if in.ResponseFormat != nil {
		format = *in.ResponseFormat
	}
	if format != "url" && format != "b64_json" {
		invalidParam(w, "response_format", "response_format must be url or b64_json")
		return
	}
	count := 1
	f.mu.Lock()
	plan := f.plan
	f.mu.Unlock()
	if in.Sequential != nil && *in.Sequential != "disabled" {
		if *in.Sequential != "auto" {
			invalidParam(w, "sequential_image_generation", "must be auto or disabled")
			return
		}
		count = 15 - len(refs)
		if o := in.SeqOptions; o != nil && o.MaxImages != nil {
			if *o.MaxImages < 1 || *o.MaxImages > 15 || *o.MaxImages+len(refs) > 15 {
				invalidParam(w, "sequential_image_generation_options.max_images", "max_images must be between 1 and 15, and reference images plus max_images at most 15")
				return
			}
			count = *o.MaxImages
		}
		if plan.Images > 0 {
			count = min(count, plan.Images)
		}
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("0217%013d%04x", time.Now().UnixMilli(), f.seq)
	f.mu.Unlock()
	var data []map[string]any
	made := 0
	for i := range count {
		if plan.Refused[i] {
			data = append(data, map[string]any{"error": map[string]any{"code": "OutputImageSensitiveContentDetected",
				"message": "The request failed because the output image may contain sensitive information."}})
			continue
		}
		img, _ := DefaultOutput("image", i)
		made++
		item := map[string]any{"size": fmt.Sprintf("%dx%d", width, height)}
		if format == "b64_json" {
			item["b64_json"] = base64.StdEncoding.EncodeToString(img)
		} else {
			key := fmt.Sprintf("%s_%d.png", id, i)
			f.mu.Lock()
			f.images[key] = img
			f.mu.Unlock()
			item["url"] = fmt.Sprintf("%s/tos/%s?X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Expires=86400&X-Tos-Signature=fake", f.URL, key)
		}
		data = append(data, item)
	}
	tokens := int64(made) * int64(width) * int64(height) / 256
	writeJSON(w, http.StatusOK, map[string]any{"model": in.Model, "created": time.Now().Unix(), "data": data,
		"usage": map[string]any{"generated_images": made, "output_tokens": tokens, "total_tokens": tokens}})
}

// arkImages reads the image field: one URL or an array of URLs.
func arkImages(raw json.RawMessage) ([]string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, arkURL(one)
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return nil, false
	}
	for _, u := range many {
		if !arkURL(u) {
			return nil, false
		}
	}
	return many, true
}

func arkURL(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "data:image/")
}

func arkImageSize(s string) (int, int, bool) {
	switch s {
	case "1K":
		return 1024, 1024, true
	case "2K":
		return 2048, 2048, true
	case "4K":
		return 4096, 4096, true
	}
	m := arkPixels.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	wd, _ := strconv.Atoi(m[1])
	ht, _ := strconv.Atoi(m[2])
	if wd <= 0 || ht <= 0 || wd*ht < 1280*720 || wd*ht > 4096*4096 || wd > 16*ht || ht > 16*wd {
		return 0, 0, false
	}
	return wd, ht, true
}

type arkContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Role     string `json:"role"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	VideoURL *struct {
		URL string `json:"url"`
	} `json:"video_url"`
	AudioURL *struct {
		URL string `json:"url"`
	} `json:"audio_url"`
}

func (f *Ark) createTask(w http.ResponseWriter, body []byte) {
	if f.scripted(w) {
		return
	}
	var in struct {
		Model      string       `json:"model"`
		Content    []arkContent `json:"content"`
		Ratio      *string      `json:"ratio"`
		Duration   *int         `json:"duration"`
		Resolution *string      `json:"resolution"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		invalidParam(w, "body", "not a JSON object")
		return
	}
	switch {
	case in.Model == "":
		arkError(w, http.StatusBadRequest, "BadRequest", "MissingParameter", "The request failed because it is missing one or multiple required parameters: model.")
		return
	case !arkVideoModels[in.Model]:
		arkError(w, http.StatusNotFound, "NotFound", "InvalidEndpointOrModel.NotFound", "The model or endpoint "+in.Model+" does not exist or you do not have access to it.")
		return
	case len(in.Content) == 0:
		arkError(w, http.StatusBadRequest, "BadRequest", "MissingParameter", "The request failed because it is missing one or multiple required parameters: content.")
		return
	}
	if why := arkCheckContent(in.Content); why != "" {
		invalidParam(w, "content", why)
		return
	}
	if refs := f.inactiveAssets(in.Content); len(refs) > 0 {
		invalidParam(w, "content", "the assets "+strings.Join(refs, ", ")+" do not exist or are not active")
		return
	}
	ratio, resolution, duration := "16:9", "1080p", 5
	if in.Ratio != nil {
		ratio = *in.Ratio
	}
	if in.Resolution != nil {
		resolution = *in.Resolution
	}
	if in.Duration != nil {
		duration = *in.Duration
	}
	if w0, _ := ArkVideoSize("16:9", resolution); w0 == 0 {
		invalidParam(w, "resolution", "resolution must be 480p, 720p or 1080p")
		return
	}
	if ratio != "adaptive" {
		if w0, _ := ArkVideoSize(ratio, resolution); w0 == 0 {
			invalidParam(w, "ratio", "ratio must be one of 16:9, 4:3, 1:1, 3:4, 9:16, 21:9, adaptive")
			return
		}
	}
	if duration != -1 && (duration < 2 || duration > 15) {
		invalidParam(w, "duration", "duration must be between 2 and 15 seconds, or -1")
		return
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("cgt-%s-%05x", time.Now().Format("20060102150405"), f.seq)
	f.tasks[id] = &arkTask{id: id, model: in.Model, status: "queued", plan: f.plan, ratio: ratio, resolution: resolution,
		duration: duration, created: time.Now()}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id})
}

// arkCheckContent applies Seedance's content rules; it returns why the
// content is refused ("" when it is accepted).
func arkCheckContent(items []arkContent) string {
	frames, first, last, refs := 0, false, false, 0
	for i, c := range items {
		var u string
		switch c.Type {
		case "text":
			if c.Text == "" {
				return fmt.Sprintf("content[%d].text is empty", i)
			}
			continue
		case "image_url":
			if c.ImageURL != nil {
				u = c.ImageURL.URL
			}
			switch c.Role {
			case "", "first_frame":
				frames, first = frames+1, true
			case "last_frame":
				frames, last = frames+1, true
			case "reference_image":
				refs++
			default:
				return fmt.Sprintf("content[%d].role %q is not valid for an image", i, c.Role)
			}
		case "video_url":
			if c.VideoURL != nil {
				u = c.VideoURL.URL
			}
			if c.Role != "reference_video" {
				return fmt.Sprintf("content[%d].role must be reference_video", i)
			}
			refs++
		case "audio_url":
			if c.AudioURL != nil {
				u = c.AudioURL.URL
			}
			if c.Role != "reference_audio" {
				return fmt.Sprintf("content[%d].role must be reference_audio", i)
			}
			refs++
		default:
			return fmt.Sprintf("content[%d].type %q is not one of text, image_url, video_url, audio_url", i, c.Type)
		}
		if !arkURL(u) && !strings.HasPrefix(u, "asset://") {
			return fmt.Sprintf("content[%d] has no valid url", i)
		}
	}
	switch {
	case frames > 0 && refs > 0:
		return "first/last frame content cannot be mixed with reference media content"
	case last && !first:
		return "a last_frame requires a first_frame"
	}
	return ""
}

func (f *Ark) queryTask(w http.ResponseWriter, id string) {
	f.mu.Lock()
	t := f.tasks[id]
	if t == nil {
		f.mu.Unlock()
		arkError(w, http.StatusNotFound, "NotFound", "ResourceNotFound", "The specified task "+id+" is not found.")
		return
	}
	t.polls++
	p := t.plan
	if t.polls <= p.RateLimited {
		f.mu.Unlock()
		if p.RetryAfter != "" {
			w.Header().Set("Retry-After", p.RetryAfter)
		}
		arkError(w, http.StatusTooManyRequests, "TooManyRequests", "RateLimitExceeded.EndpointRPMExceeded",
			"The Requests Per Minute (RPM) limit of the associated endpoint for your account has been exceeded.")
		return
	}
	k := t.polls - p.RateLimited
	if t.status == "queued" || t.status == "running" {
		switch {
		case k <= p.Queued:
			t.status = "queued"
		case k <= p.Queued+p.Polls:
			t.status = "running"
		case p.FailCode != "" || p.FailMessage != "":
			t.status = "failed"
		default:
			t.status = "succeeded"
		}
	}
	ratio := t.ratio
	if ratio == "adaptive" {
		ratio = p.Ratio
		if ratio == "" {
			ratio = "16:9"
		}
	}
	fps := p.FPS
	if fps == 0 {
		fps = 24
	}
	duration := t.duration
	if duration == -1 {
		duration = 8
	}
	resp := map[string]any{"id": t.id, "model": t.model, "status": t.status, "created_at": t.created.Unix(),
		"updated_at": time.Now().Unix(), "seed": 11, "resolution": t.resolution, "ratio": ratio, "duration": duration,
		"framespersecond": fps, "service_tier": "default", "execution_expires_after": 172800, "error": nil}
	switch t.status {
	case "succeeded":
		wd, ht := ArkVideoSize(ratio, t.resolution)
		tokens := ArkVideoTokens(wd, ht, fps, duration)
		resp["content"] = map[string]any{"video_url": fmt.Sprintf("%s/tos/video/%s.mp4?X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Expires=86400&X-Tos-Signature=fake", f.URL, t.id)}
		resp["usage"] = map[string]any{"completion_tokens": tokens, "total_tokens": tokens}
	case "failed":
		resp["error"] = map[string]any{"code": p.FailCode, "message": p.FailMessage}
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

func (f *Ark) deleteTask(w http.ResponseWriter, id string) {
	f.mu.Lock()
	t := f.tasks[id]
	status := ""
	if t != nil {
		status = t.status
		switch status {
		case "queued":
			t.status = "cancelled"
		case "succeeded", "failed", "expired":
			delete(f.tasks, id)
		}
	}
	f.mu.Unlock()
	switch status {
	case "":
		arkError(w, http.StatusNotFound, "NotFound", "ResourceNotFound", "The specified task "+id+" is not found.")
	case "running", "cancelled":
		invalidParam(w, "id", "a task in status "+status+" cannot be cancelled or deleted")
	default:
		writeJSON(w, http.StatusOK, map[string]any{})
	}
}

// object serves a generated image or a finished task's video, as TOS would.
func (f *Ark) object(w http.ResponseWriter, rest string) {
	if id, ok := strings.CutPrefix(rest, "video/"); ok {
		id = strings.TrimSuffix(id, ".mp4")
		f.mu.Lock()
		t := f.tasks[id]
		var data []byte
		if t != nil && t.status == "succeeded" {
			data = t.plan.Video
			if data == nil {
				data, _ = DefaultOutput("video", 0)
			}
		}
		f.mu.Unlock()
		if data == nil {
			http.Error(w, "NoSuchKey", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(data)
		return
	}
	f.mu.Lock()
	data := f.images[rest]
	f.mu.Unlock()
	if data == nil {
		http.Error(w, "NoSuchKey", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(data)
}
