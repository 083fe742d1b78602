package fakeupstream

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OpenAIImages is a fake of the OpenAI Images API's generations endpoint
// (POST /v1/images/generations), which answers synchronously. It requires
// Authorization: Bearer Key() and checks the request as the public API does
// for the model families it knows: prompt required; n from 1 to 10 (dall-e-3:
// 1); size from the model's list; response_format refused by the GPT image
// models, which always answer b64_json (with usage and output_format),
// while dall-e models answer url unless b64_json is asked for. URL outputs
// are served by the fake under /images/ with an expiry. Errors have the
// OpenAI shape {"error":{"message","type","param","code"}}; ImageFailure
// scripts them.
type OpenAIImages struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	failures []ImageFailure
	images   [][]byte
	files    map[string][]byte
	reqs     []Request
	seq      int
	// usage, when set, is the usage a gpt-image answer reports instead of
	// the default.
	usage map[string]any
}

// ImageFailure scripts the answer to one request.
type ImageFailure struct {
	Status     int
	Message    string
	Type       string // default by status
	Code       string // e.g. content_policy_violation; default null
	RetryAfter string
	Reset      bool
}

// NewOpenAIImages starts the fake.
func NewOpenAIImages() *OpenAIImages {
	f := &OpenAIImages{key: DefaultKey, files: map[string][]byte{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *OpenAIImages) Key() string { return f.key }

// Fail scripts the next requests to fail, in order.
func (f *OpenAIImages) Fail(s ...ImageFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// SetUsage sets the usage object gpt-image answers report (the API's
// shape: input_tokens, output_tokens, total_tokens, input_tokens_details
// with text_tokens, image_tokens, cached_tokens and cached_tokens_details).
func (f *OpenAIImages) SetUsage(u map[string]any) {
	f.mu.Lock()
	f.usage = u
	f.mu.Unlock()
}

// SetImages sets the image bytes answered (output i gets images[i %
// len]); default small PNGs.
func (f *OpenAIImages) SetImages(images ...[]byte) {
	f.mu.Lock()
	f.images = images
	f.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (f *OpenAIImages) Requests() []Request {
	return cloneRequests(&f.mu, &f.reqs)
}

// Image is the bytes of output i.
func (f *OpenAIImages) Image(i int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.images) > 0 {
		return f.images[i%len(f.images)]
	}
	return PNG(8, 8, uint8(30*i))
}

var imageSizes = map[string][]string{
	"dall-e-2":  {"256x256", "512x512", "1024x1024"},
	"dall-e-3":  {"1024x1024", "1792x1024", "1024x1792"},
	"gpt-image": {"1024x1024", "1536x1024", "1024x1536", "auto"},
}

func family(model string) string {
	switch model {
	case "", "dall-e-2":
		return "dall-e-2"
	case "dall-e-3":
		return "dall-e-3"
	}
	return "gpt-image"
}

func (f *OpenAIImages) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/images/") {
		f.file(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/images/generations" {
		imageError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimPrefix(auth, "Bearer ") != f.key {
		imageError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.", "")
		return
	}
	if fail, ok := takeFailure(&f.mu, &f.failures); ok {
		msg := beginFailure(w, fail.Status, fail.Message, fail.RetryAfter, fail.Reset)
		typ := fail.Type
		if typ == "" {
			typ = openAIErrorType(fail.Status)
		}
		imageError(w, fail.Status, typ, fail.Code, msg, "")
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		imageError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.", "")
		return
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(req[k], &s)
		return s
	}
	model, prompt, size, format := str("model"), str("prompt"), str("size"), str("response_format")
	fam := family(model)
	n := 1
	if raw, ok := req["n"]; ok {
		if err := json.Unmarshal(raw, &n); err != nil {
			imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_type", "Invalid type for 'n': expected an integer.", "n")
			return
		}
	}
	switch {
	case prompt == "":
		imageError(w, http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "Missing required parameter: 'prompt'.", "prompt")
		return
	case n < 1 || n > 10:
		imageError(w, http.StatusBadRequest, "invalid_request_error", "integer_out_of_range", fmt.Sprintf("Invalid 'n': integer out of range (got %d, expected 1 to 10).", n), "n")
		return
	case fam == "dall-e-3" && n != 1:
		imageError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'n': dall-e-3 supports only n=1.", "n")
		return
	case size != "" && !slices.Contains(imageSizes[fam], size):
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: '%s'.", size, strings.Join(imageSizes[fam], "', '")), "size")
		return
	case fam == "gpt-image" && format != "":
		imageError(w, http.StatusBadRequest, "invalid_request_error", "unknown_parameter", "Unknown parameter: 'response_format'.", "response_format")
		return
	case format != "" && format != "url" && format != "b64_json":
		imageError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid value: '"+format+"'. Supported values are: 'url' and 'b64_json'.", "response_format")
		return
	}
	created := time.Now().Unix()
	resp := map[string]any{"created": created}
	var data []map[string]any
	for i := range n {
		img := f.Image(i)
		if fam == "gpt-image" || format == "b64_json" {
			data = append(data, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(img)})
			continue
		}
		f.mu.Lock()
		f.seq++
		name := fmt.Sprintf("img-%06d.png", f.seq)
		f.files[name] = img
		f.mu.Unlock()
		data = append(data, map[string]any{"url": fmt.Sprintf("%s/images/%s?se=%d", f.URL, name, created+3600)})
	}
	resp["data"] = data
	if fam == "gpt-image" {
		resp["background"], resp["output_format"], resp["quality"], resp["size"] = "opaque", "png", "medium", "1024x1024"
		resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 1056 * n, "total_tokens": 10 + 1056*n,
			"input_tokens_details": map[string]any{"text_tokens": 10, "image_tokens": 0}}
		f.mu.Lock()
		if f.usage != nil {
			resp["usage"] = f.usage
		}
		f.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, resp)
}

func (f *OpenAIImages) file(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/images/")
	se, _ := strconv.ParseInt(r.URL.Query().Get("se"), 10, 64)
	f.mu.Lock()
	img, ok := f.files[name]
	f.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case se < time.Now().Unix():
		http.Error(w, "AuthenticationFailed: signed expiry time has passed", http.StatusForbidden)
	default:
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	}
}

func imageError(w http.ResponseWriter, status int, typ, code, msg, param string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": e})
}
