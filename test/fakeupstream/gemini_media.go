package fakeupstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// GeminiMedia is a fake of the Gemini API's media generation, written from
// Google's public pages (ai.google.dev/gemini-api/docs/image-generation,
// ai.google.dev/gemini-api/docs/video, ai.google.dev/api/generate-content)
// and the official Go SDK's wire conversions (google.golang.org/genai,
// models.go: generateVideosParametersToMldev,
// generateVideosOperationFromMldev; files.go: Download):
//
//   - POST /v1beta/models/{image model}:generateContent with
//     generationConfig.responseModalities including IMAGE and an optional
//     imageConfig {aspectRatio, imageSize}; reference images as inlineData
//     parts. The answer's candidate has a text part and an inlineData image
//     part (a thought image first for the gemini-3 models), finishReason
//     STOP and usageMetadata with per-modality details; or
//     promptFeedback.blockReason, or a candidate finished with
//     IMAGE_SAFETY and no image.
//   - POST /v1beta/models/{veo model}:predictLongRunning with
//     {"instances":[{"prompt","image","lastFrame","referenceImages"}],
//     "parameters":{…}}; the answer is an operation {"name":
//     "models/{model}/operations/{id}"}.
//   - GET /v1beta/models/{model}/operations/{id}: {"name"} while running
//     (proto3 JSON leaves done: false out), then done with
//     response.generateVideoResponse.generatedSamples[].video.uri, or with
//     error {code, message}, or with raiMediaFilteredCount/Reasons and no
//     sample.
//   - GET /v1beta/files/{id}:download?alt=media: the video, with the key.
//
// Every call needs x-goog-api-key (or ?key=) = Key(); errors are
// {"error":{"code","message","status"}}; unknown request fields are
// refused, as Google's JSON APIs do.
type GeminiMedia struct {
	*httptest.Server

	mu       sync.Mutex
	key      string
	image    GeminiImagePlan
	video    VeoPlan
	failures []GeminiFailure
	ops      map[string]*veoOp
	reqs     []Request
	seq      int
}

// GeminiImagePlan scripts the answers to generateContent.
type GeminiImagePlan struct {
	// Output is the image returned (default DefaultOutput("image", 0)).
	Output []byte
	// BlockReason blocks the prompt (promptFeedback.blockReason, e.g.
	// PROHIBITED_CONTENT): no candidate.
	BlockReason string
	// FinishReason, when set, ends the candidate without an image (e.g.
	// IMAGE_SAFETY, NO_IMAGE).
	FinishReason string
}

// VeoPlan scripts the operations started after it is set.
type VeoPlan struct {
	// Polls is how many queries answer not done before the final state.
	Polls int
	// RateLimited is how many of the first queries answer 429
	// RESOURCE_EXHAUSTED with a RetryInfo of RetryDelay.
	RateLimited int
	RetryDelay  string
	// FailCode and FailMessage finish the operation with an error.
	FailCode    int
	FailMessage string
	// Filtered finishes the operation without a sample, with these
	// raiMediaFilteredReasons.
	Filtered []string
	// Output is the video served (default DefaultOutput("video", 0)).
	Output []byte
}

// GeminiFailure scripts the answer to one generateContent or
// predictLongRunning call.
type GeminiFailure struct {
	Status     int
	Message    string
	RetryDelay string
	Reset      bool
}

type veoOp struct {
	name, file string
	polls      int
	plan       VeoPlan
}

// Token figures of the fake's usage: an image input costs 258 tokens, an
// image output 1290 (gemini-2.5-flash-image) or 1120 at 1K/2K and 2000 at
// 4K (gemini-3-pro-image), as Google's pricing page counts them; text is a
// token per 4 bytes.
const (
	GeminiImageInputTokens = 258
	GeminiFlashImageTokens = 1290
	GeminiProImageTokens   = 1120
	GeminiPro4KImageTokens = 2000
	GeminiProThoughtTokens = 180
)

var geminiImageModels = map[string]bool{"gemini-2.5-flash-image": true, "gemini-3-pro-image-preview": true, "gemini-3.1-flash-image-preview": true}

// veoModels lists each Veo model's clip lengths.
var veoModels = map[string][]int{
	"veo-3.1-generate-preview": {4, 6, 8}, "veo-3.1-fast-generate-preview": {4, 6, 8},
	"veo-3.0-generate-001": {4, 6, 8}, "veo-3.0-fast-generate-001": {4, 6, 8}, "veo-2.0-generate-001": {5, 6, 7, 8},
}

var geminiAspectRatios = map[string]bool{"1:1": true, "2:3": true, "3:2": true, "3:4": true, "4:3": true, "4:5": true,
	"5:4": true, "9:16": true, "16:9": true, "21:9": true}

// NewGeminiMedia starts the fake.
func NewGeminiMedia() *GeminiMedia {
	f := &GeminiMedia{key: DefaultKey, ops: map[string]*veoOp{}}
	f.Server = start(http.HandlerFunc(f.serve))
	return f
}

// Key is the credential the fake accepts.
func (f *GeminiMedia) Key() string { return f.key }

// SetImagePlan sets the answers to generateContent from now on.
func (f *GeminiMedia) SetImagePlan(p GeminiImagePlan) {
	f.mu.Lock()
	f.image = p
	f.mu.Unlock()
}

// SetVideoPlan sets the course of the operations started from now on.
func (f *GeminiMedia) SetVideoPlan(p VeoPlan) {
	f.mu.Lock()
	f.video = p
	f.mu.Unlock()
}

// Fail scripts the next generation calls to fail, in order.
func (f *GeminiMedia) Fail(s ...GeminiFailure) {
	f.mu.Lock()
	f.failures = append(f.failures, s...)
	f.mu.Unlock()
}

// Requests returns copies of the requests received so far.
func (f *GeminiMedia) Requests() []Request { return cloneRequests(&f.mu, &f.reqs) }

// Count counts the requests received with method whose path contains part.
func (f *GeminiMedia) Count(method, part string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == method && strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

func gError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, geminiError(status, msg, ""))
}

func (f *GeminiMedia) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	switch {
	case key == "":
		gError(w, http.StatusForbidden, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	case key != f.key:
		gError(w, http.StatusBadRequest, "API key not valid. Please pass a valid API key.")
		return
	}
	path := r.URL.Path
	if file, ok := strings.CutPrefix(path, "/v1beta/files/"); ok && r.Method == http.MethodGet {
		f.download(w, r, file)
		return
	}
	if strings.Contains(path, "/operations/") && r.Method == http.MethodGet {
		f.operation(w, strings.TrimPrefix(path, "/v1beta/"))
		return
	}
	model, method, ok := geminiPath(path)
	if !ok || r.Method != http.MethodPost {
		gError(w, http.StatusNotFound, "Not Found")
		return
	}
	switch {
	case method == "generateContent" && geminiImageModels[model]:
		f.generate(w, model, body)
	case method == "predictLongRunning" && veoModels[model] != nil:
		f.predict(w, model, body)
	case method == "generateContent" || method == "predictLongRunning":
		gError(w, http.StatusNotFound, fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for %s.", model, method))
	default:
		gError(w, http.StatusNotFound, "Not Found")
	}
}

// failure plays a scripted failure; it reports whether one was played.
func (f *GeminiMedia) failure(w http.ResponseWriter) bool {
	fail, ok := takeFailure(&f.mu, &f.failures)
	if !ok {
		return false
	}
	msg := beginFailure(w, fail.Status, fail.Message, "", fail.Reset)
	writeJSON(w, fail.Status, geminiError(fail.Status, msg, fail.RetryDelay))
	return true
}

type gImageRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text       *string `json:"text"`
			InlineData *struct {
				MimeType string `json:"mimeType"`
				Data     string `json:"data"`
			} `json:"inlineData"`
		} `json:"parts"`
	} `json:"contents"`
	GenerationConfig *struct {
		ResponseModalities []string `json:"responseModalities"`
		ImageConfig        *struct {
			AspectRatio string `json:"aspectRatio"`
			ImageSize   string `json:"imageSize"`
		} `json:"imageConfig"`
	} `json:"generationConfig"`
}

func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (f *GeminiMedia) generate(w http.ResponseWriter, model string, body []byte) {
	var in gImageRequest
	if err := strictJSON(body, &in); err != nil {
		gError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	if len(in.Contents) == 0 {
		gError(w, http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	var textBytes, images int64
	for i, c := range in.Contents {
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			gError(w, http.StatusBadRequest, fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role %q)", i, c.Role))
			return
		}
		for j, p := range c.Parts {
			switch {
			case p.Text != nil && p.InlineData == nil:
				textBytes += int64(len(*p.Text))
			case p.InlineData != nil && p.Text == nil:
				data, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
				if err != nil || len(data) == 0 {
					gError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value at 'contents[%d].parts[%d].inline_data.data' (TYPE_BYTES), Base64 decoding failed", i, j))
					return
				}
				if !strings.HasPrefix(p.InlineData.MimeType, "image/") {
					gError(w, http.StatusBadRequest, fmt.Sprintf("Unsupported MIME type: %s", p.InlineData.MimeType))
					return
				}
				images++
			default:
				gError(w, http.StatusBadRequest, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].data: required oneof field 'data' must have one initialized field", i, j))
				return
			}
		}
	}
	size := ""
	if gc := in.GenerationConfig; gc != nil {
		for _, m := range gc.ResponseModalities {
			if m != "TEXT" && m != "IMAGE" {
				gError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value at 'generation_config.response_modalities' (%s)", m))
				return
			}
		}
		if ic := gc.ImageConfig; ic != nil {
			if ic.AspectRatio != "" && !geminiAspectRatios[ic.AspectRatio] {
				gError(w, http.StatusBadRequest, "Unsupported aspect ratio: "+ic.AspectRatio)
				return
			}
			if ic.ImageSize != "" && ic.ImageSize != "1K" && ic.ImageSize != "2K" && ic.ImageSize != "4K" {
				gError(w, http.StatusBadRequest, "Unsupported image size: "+ic.ImageSize)
				return
			}
			size = ic.ImageSize
		}
	}
	if in.GenerationConfig == nil || !contains(in.GenerationConfig.ResponseModalities, "IMAGE") {
		// Without the IMAGE modality the image models answer text only.
		gError(w, http.StatusBadRequest, "This fake answers image requests only: set generationConfig.responseModalities to [\"TEXT\",\"IMAGE\"]")
		return
	}
	if f.failure(w) {
		return
	}
	f.mu.Lock()
	plan := f.image
	f.seq++
	id := fmt.Sprintf("gimg%08d", f.seq)
	f.mu.Unlock()
	prompt := (textBytes + 3) / 4
	promptTokens := prompt + images*GeminiImageInputTokens
	usage := map[string]any{"promptTokenCount": promptTokens, "totalTokenCount": promptTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": prompt}}}
	if images > 0 {
		usage["promptTokensDetails"] = append(usage["promptTokensDetails"].([]any),
			map[string]any{"modality": "IMAGE", "tokenCount": images * GeminiImageInputTokens})
	}
	resp := map[string]any{"modelVersion": model, "responseId": id, "usageMetadata": usage}
	if plan.BlockReason != "" {
		resp["promptFeedback"] = map[string]any{"blockReason": plan.BlockReason}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	if plan.FinishReason != "" {
		resp["candidates"] = []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{}},
			"finishReason": plan.FinishReason, "index": 0}}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	out := plan.Output
	if out == nil {
		out, _ = DefaultOutput("image", 0)
	}
	imageTokens, thoughts := int64(GeminiFlashImageTokens), int64(0)
	parts := []any{map[string]any{"text": "Here is the image you asked for."}}
	if strings.HasPrefix(model, "gemini-3-pro") {
		imageTokens, thoughts = GeminiProImageTokens, GeminiProThoughtTokens
		if size == "4K" {
			imageTokens = GeminiPro4KImageTokens
		}
		// Gemini 3 Pro Image thinks with interim images, marked as thoughts.
		draft, _ := DefaultOutput("image", 1)
		parts = append([]any{map[string]any{"thought": true, "inlineData": map[string]any{"mimeType": "image/png",
			"data": base64.StdEncoding.EncodeToString(draft)}}}, parts...)
	}
	parts = append(parts, map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(out)}})
	textOut := int64(8)
	usage["candidatesTokenCount"] = textOut + imageTokens
	usage["candidatesTokensDetails"] = []any{map[string]any{"modality": "TEXT", "tokenCount": textOut},
		map[string]any{"modality": "IMAGE", "tokenCount": imageTokens}}
	if thoughts > 0 {
		usage["thoughtsTokenCount"] = thoughts
	}
	usage["totalTokenCount"] = promptTokens + textOut + imageTokens + thoughts
	resp["candidates"] = []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts},
		"finishReason": "STOP", "index": 0}}
	writeJSON(w, http.StatusOK, resp)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

type veoFakeImage struct {
	BytesBase64Encoded string `json:"bytesBase64Encoded"`
	MimeType           string `json:"mimeType"`
}

type veoFakeRequest struct {
	Instances []struct {
		Prompt          *string       `json:"prompt"`
		Image           *veoFakeImage `json:"image"`
		LastFrame       *veoFakeImage `json:"lastFrame"`
		ReferenceImages []struct {
			Image         *veoFakeImage `json:"image"`
			ReferenceType string        `json:"referenceType"`
		} `json:"referenceImages"`
	} `json:"instances"`
	Parameters *struct {
		AspectRatio      string  `json:"aspectRatio"`
		DurationSeconds  *int    `json:"durationSeconds"`
		Resolution       string  `json:"resolution"`
		PersonGeneration string  `json:"personGeneration"`
		NegativePrompt   *string `json:"negativePrompt"`
		SampleCount      *int    `json:"sampleCount"`
		EnhancePrompt    *bool   `json:"enhancePrompt"`
	} `json:"parameters"`
}

func validImage(img *veoFakeImage) bool {
	if img == nil {
		return true
	}
	data, err := base64.StdEncoding.DecodeString(img.BytesBase64Encoded)
	return err == nil && len(data) > 0 && strings.HasPrefix(img.MimeType, "image/")
}

// predictCheck is the first rule a Veo request breaks ("" when none).
func predictCheck(model string, in veoFakeRequest) string {
	if len(in.Instances) != 1 {
		return "instances must contain exactly one instance"
	}
	inst := in.Instances[0]
	if (inst.Prompt == nil || *inst.Prompt == "") && inst.Image == nil {
		return "A prompt or an image is required."
	}
	if !validImage(inst.Image) || !validImage(inst.LastFrame) {
		return "image.bytesBase64Encoded must be base64 image bytes with an image mimeType"
	}
	if inst.LastFrame != nil && inst.Image == nil {
		return "lastFrame requires image (the first frame)"
	}
	if len(inst.ReferenceImages) > 3 {
		return "referenceImages supports at most 3 images"
	}
	for _, r := range inst.ReferenceImages {
		if !validImage(r.Image) || r.Image == nil || r.ReferenceType != "asset" {
			return "referenceImages[].image must be an image and referenceType asset"
		}
	}
	p := in.Parameters
	if p == nil {
		return ""
	}
	secs := 8
	if p.DurationSeconds != nil {
		secs = *p.DurationSeconds
	}
	okSecs := false
	for _, v := range veoModels[model] {
		okSecs = okSecs || v == secs
	}
	switch {
	case !okSecs:
		return fmt.Sprintf("durationSeconds %d is not supported by %s", secs, model)
	case p.AspectRatio != "" && p.AspectRatio != "16:9" && p.AspectRatio != "9:16":
		return "aspectRatio must be 16:9 or 9:16"
	case p.Resolution != "" && p.Resolution != "720p" && p.Resolution != "1080p" && p.Resolution != "4k":
		return "resolution must be 720p, 1080p or 4k"
	case (p.Resolution == "1080p" || p.Resolution == "4k") && secs != 8:
		return p.Resolution + " is only supported with durationSeconds 8"
	case len(inst.ReferenceImages) > 0 && secs != 8:
		return "referenceImages are only supported with durationSeconds 8"
	case p.PersonGeneration != "" && p.PersonGeneration != "allow_all" && p.PersonGeneration != "allow_adult" && p.PersonGeneration != "dont_allow":
		return "personGeneration must be allow_all, allow_adult or dont_allow"
	case p.SampleCount != nil && (*p.SampleCount < 1 || *p.SampleCount > 4):
		return "sampleCount must be between 1 and 4"
	}
	return ""
}

func (f *GeminiMedia) predict(w http.ResponseWriter, model string, body []byte) {
	var in veoFakeRequest
	if err := strictJSON(body, &in); err != nil {
		gError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	if msg := predictCheck(model, in); msg != "" {
		gError(w, http.StatusBadRequest, msg)
		return
	}
	if f.failure(w) {
		return
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("op%010d", f.seq)
	name := "models/" + model + "/operations/" + id
	f.ops[name] = &veoOp{name: name, file: fmt.Sprintf("vid%010d", f.seq), plan: f.video}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"name": name})
}

func (f *GeminiMedia) operation(w http.ResponseWriter, name string) {
	f.mu.Lock()
	op := f.ops[name]
	if op == nil {
		f.mu.Unlock()
		gError(w, http.StatusNotFound, "Requested entity was not found.")
		return
	}
	op.polls++
	p, polls, file := op.plan, op.polls, op.file
	f.mu.Unlock()
	if polls <= p.RateLimited {
		writeJSON(w, http.StatusTooManyRequests, geminiError(http.StatusTooManyRequests,
			"Resource has been exhausted (e.g. check quota).", p.RetryDelay))
		return
	}
	if polls-p.RateLimited <= p.Polls {
		writeJSON(w, http.StatusOK, map[string]any{"name": name})
		return
	}
	out := map[string]any{"name": name, "done": true}
	switch {
	case p.FailCode != 0 || p.FailMessage != "":
		out["error"] = map[string]any{"code": p.FailCode, "message": p.FailMessage}
	case len(p.Filtered) > 0:
		out["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"raiMediaFilteredCount": len(p.Filtered), "raiMediaFilteredReasons": p.Filtered}}
	default:
		out["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": []any{map[string]any{"video": map[string]any{
				"uri": f.URL + "/v1beta/files/" + file + ":download?alt=media"}}}}}
	}
	writeJSON(w, http.StatusOK, out)
}

// download serves a finished operation's video (files/{id}:download).
func (f *GeminiMedia) download(w http.ResponseWriter, r *http.Request, file string) {
	id, ok := strings.CutSuffix(file, ":download")
	var out []byte
	found := false
	f.mu.Lock()
	for _, op := range f.ops {
		if op.file == id && ok {
			found, out = true, op.plan.Output
		}
	}
	f.mu.Unlock()
	if !found || r.URL.Query().Get("alt") != "media" {
		gError(w, http.StatusNotFound, "Requested entity was not found.")
		return
	}
	if out == nil {
		out, _ = DefaultOutput("video", 0)
	}
	w.Header().Set("Content-Type", "video/mp4")
	_, _ = w.Write(out)
}
