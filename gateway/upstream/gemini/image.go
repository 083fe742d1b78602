// Image tasks on the Gemini image models (gemini-2.5-flash-image,
// gemini-3-pro-image-preview, …): generateContent with the IMAGE response
// modality, which is synchronous, so the submission's answer is the result.
//
// Request: POST {baseURL}/{apiVersion}/models/{model}:generateContent,
// x-goog-api-key, body {"contents":[{"role":"user","parts":[{"text":
// prompt}, {"inlineData":{"mimeType","data"}}…]}], "generationConfig":
// {"responseModalities":["TEXT","IMAGE"], "imageConfig":{"aspectRatio",
// "imageSize"}}}. Reference images are downloaded (the API takes no
// arbitrary URLs) and sent inline.
//
// Answer: candidates[0].content.parts[].inlineData {mimeType, data}
// (base64) are the images (parts marked thought are the model's drafts and
// are skipped); usageMetadata is the token usage; promptFeedback.blockReason
// or a safety finishReason is a content refusal.

package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Image limits and defaults.
const (
	// DefaultImageTimeout bounds one generateContent call (the image
	// models take up to a minute or two, more with thinking).
	DefaultImageTimeout = 180 * time.Second
	// MaxInlineBytes bounds the reference images of one request together:
	// the API refuses requests over 20 MB, and base64 grows them by 4/3.
	MaxInlineBytes = 14 << 20
	// MaxImageReferences is the most reference images the image models
	// take (gemini-3-pro-image-preview: 14; 2.5 Flash Image works best
	// with 3).
	MaxImageReferences = 14
)

// aspectRatios are the imageConfig.aspectRatio values the image models
// accept (the last four: gemini-3.1-flash-image only).
var aspectRatios = map[string]bool{"1:1": true, "2:3": true, "3:2": true, "3:4": true, "4:3": true, "4:5": true,
	"5:4": true, "9:16": true, "16:9": true, "21:9": true, "1:4": true, "4:1": true, "1:8": true, "8:1": true}

// imageRequest is what the image families' validated requests have in
// common for this adapter.
type imageRequest struct {
	Prompt     string   `json:"prompt"`
	N          *int     `json:"n"`
	Size       string   `json:"size"`
	ImageURLs  []string `json:"image_urls"`
	Resolution string   `json:"resolution"`
	Metadata   struct {
		Resolution string `json:"resolution"`
	} `json:"metadata"`
}

type wirePart struct {
	Text       string      `json:"text,omitempty"`
	InlineData *inlineData `json:"inlineData,omitempty"`
	Thought    bool        `json:"thought,omitempty"`
}

type inlineData struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type wireContent struct {
	Role  string     `json:"role"`
	Parts []wirePart `json:"parts"`
}

type wireImageRequest struct {
	Contents         []wireContent `json:"contents"`
	GenerationConfig struct {
		ResponseModalities []string     `json:"responseModalities"`
		ImageConfig        *imageConfig `json:"imageConfig,omitempty"`
	} `json:"generationConfig"`
}

type imageConfig struct {
	AspectRatio string `json:"aspectRatio,omitempty"`
	ImageSize   string `json:"imageSize,omitempty"`
}

type modalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int64  `json:"tokenCount"`
}

// wireImageResponse is the part of a GenerateContentResponse read here.
type wireImageResponse struct {
	Candidates []struct {
		Content struct {
			Parts []wirePart `json:"parts"`
		} `json:"content"`
		FinishReason  string `json:"finishReason"`
		FinishMessage string `json:"finishMessage"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64           `json:"promptTokenCount"`
		CandidatesTokenCount    int64           `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64           `json:"thoughtsTokenCount"`
		CachedContentTokenCount int64           `json:"cachedContentTokenCount"`
		TotalTokenCount         int64           `json:"totalTokenCount"`
		PromptTokensDetails     []modalityCount `json:"promptTokensDetails"`
		CandidatesTokensDetails []modalityCount `json:"candidatesTokensDetails"`
	} `json:"usageMetadata"`
}

// policyFinish are the finish reasons of an answer refused for its
// content.
var policyFinish = map[string]bool{"SAFETY": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
	"RECITATION": true, "IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true}

func (p *Provider) generateImage(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	var in imageRequest
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if in.N != nil && *in.N > 1 {
		// One generateContent call makes one image (the image models refuse
		// candidateCount), and n calls could not be paid for atomically.
		return upstream.Submitted{}, upstream.Unsupported("backend %q (gemini) makes one image per request", c.Backend.Name)
	}
	if len(in.ImageURLs) > MaxImageReferences {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (gemini) takes at most %d reference images", c.Backend.Name, MaxImageReferences)
	}
	ic, err := imageConfigOf(in, c.Backend.Options)
	if err != nil {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (gemini): %s", c.Backend.Name, err)
	}
	model := strings.TrimPrefix(c.Model(), "models/")
	if model == "" || strings.ContainsAny(model, "/?#") {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (gemini) has no usable upstream model %q", c.Backend.Name, model)
	}
	parts := []wirePart{{Text: in.Prompt}}
	left := int64(MaxInlineBytes)
	for _, u := range in.ImageURLs {
		ref, err := upstream.FetchReference(ctx, p.downloads, u, left)
		if err != nil {
			return upstream.Submitted{}, err
		}
		left -= int64(len(ref.Data))
		parts = append(parts, wirePart{InlineData: &inlineData{MimeType: ref.MIMEType, Data: base64.StdEncoding.EncodeToString(ref.Data)}})
	}
	w := wireImageRequest{Contents: []wireContent{{Role: "user", Parts: parts}}}
	w.GenerationConfig.ResponseModalities = []string{"TEXT", "IMAGE"}
	w.GenerationConfig.ImageConfig = ic
	body, _ := json.Marshal(w)

	x, err := p.exchange(ctx, c, http.MethodPost, base(c.Backend)+"/models/"+url.PathEscape(model)+":generateContent", body, true, DefaultImageTimeout)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var resp wireImageResponse
	if err := json.Unmarshal(x.Body, &resp); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's answer is not valid JSON", Err: err}
	}
	st, err := imageStatus(resp)
	if err != nil {
		return upstream.Submitted{}, err
	}
	// No ID: the result exists only in this answer, so a submission whose
	// result could not be stored is made again.
	return upstream.Submitted{Final: &st}, nil
}

// imageConfigOf maps the family's size and resolution to imageConfig: a
// ratio Gemini knows as aspectRatio (explicit pixels reduced to their
// ratio), "auto" and match_input_image as none (the model follows the
// reference image); the resolution (1K, 2K, 4K) as imageSize unless the
// backend option imageSize says "omit" (models without the setting) or
// names a fixed size.
func imageConfigOf(in imageRequest, o map[string]string) (*imageConfig, error) {
	var ic imageConfig
	switch s := strings.ToLower(strings.TrimSpace(in.Size)); s {
	case "", "auto", "match_input_image":
	default:
		r, ok := ratioOf(s)
		if !ok {
			return nil, fmt.Errorf("size %q is not an aspect ratio the image models support", in.Size)
		}
		ic.AspectRatio = r
	}
	switch v := o["imageSize"]; v {
	case "omit":
	case "":
		ic.ImageSize = strings.ToUpper(in.Resolution)
		if ic.ImageSize == "" {
			ic.ImageSize = strings.ToUpper(in.Metadata.Resolution)
		}
	default:
		ic.ImageSize = v
	}
	if ic == (imageConfig{}) {
		return nil, nil
	}
	return &ic, nil
}

// ratioOf is the aspect ratio of "W:H", "WxH" or "W*H" in lowest terms,
// when the image models support it.
func ratioOf(s string) (string, bool) {
	for _, sep := range []string{":", "x", "*"} {
		a, b, ok := strings.Cut(s, sep)
		if !ok {
			continue
		}
		w, err1 := strconv.Atoi(a)
		h, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || w <= 0 || h <= 0 {
			return "", false
		}
		d := gcd(w, h)
		r := strconv.Itoa(w/d) + ":" + strconv.Itoa(h/d)
		return r, aspectRatios[r]
	}
	return "", false
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// imageStatus reads a generateContent answer: its images and usage, or the
// reason there is none (a refusal with the policy code).
func imageStatus(resp wireImageResponse) (upstream.Status, error) {
	if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
		msg := "the upstream refused the prompt (" + pf.BlockReason + ")"
		if pf.BlockReasonMessage != "" {
			msg += ": " + pf.BlockReasonMessage
		}
		return upstream.Status{State: upstream.Failed, ErrorCode: upstream.CodePolicy, ErrorMessage: msg}, nil
	}
	if len(resp.Candidates) == 0 {
		return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream answered without a candidate"}, nil
	}
	cand := resp.Candidates[0]
	st := upstream.Status{State: upstream.Succeeded, Progress: 100, Usage: imageUsage(resp)}
	var text []string
	for i, part := range cand.Content.Parts {
		switch {
		case part.Thought:
			// A draft of the model's thinking, not the answer.
		case part.InlineData != nil && strings.HasPrefix(part.InlineData.MimeType, "image/"):
			data, err := base64.StdEncoding.DecodeString(part.InlineData.Data)
			if err != nil || len(data) == 0 {
				return upstream.Status{}, &upstream.Error{Class: upstream.Permanent,
					Message: fmt.Sprintf("part %d of the upstream's answer is not a valid base64 image", i), Err: err}
			}
			st.Outputs = append(st.Outputs, upstream.Output{Data: data, ContentType: part.InlineData.MimeType})
		case part.Text != "":
			text = append(text, part.Text)
		}
	}
	if len(st.Outputs) > 0 {
		return st, nil
	}
	msg := "the upstream answered without an image (finishReason " + cand.FinishReason + ")"
	switch {
	case cand.FinishMessage != "":
		msg += ": " + cand.FinishMessage
	case len(text) > 0:
		msg += ": " + truncate(strings.Join(text, " "), 300)
	}
	fail := upstream.Status{State: upstream.Failed, ErrorMessage: msg}
	if policyFinish[cand.FinishReason] {
		fail.ErrorCode = upstream.CodePolicy
	}
	return fail, nil
}

// imageUsage maps usageMetadata onto the image usage: the prompt is the
// input (its IMAGE modality count the image part, the rest text, the
// cached content inside it), the candidates plus the thoughts the output
// (the IMAGE modality the image part; thoughts bill as text output, as
// Google prices them). Nil when the answer has none.
func imageUsage(resp wireImageResponse) *upstream.ImageUsage {
	m := resp.UsageMetadata
	if m == nil {
		return nil
	}
	inImage := modality(m.PromptTokensDetails, "IMAGE")
	out := m.CandidatesTokenCount + m.ThoughtsTokenCount
	outImage := modality(m.CandidatesTokensDetails, "IMAGE")
	u := &upstream.ImageUsage{InputTokens: m.PromptTokenCount, OutputTokens: out, TotalTokens: m.PromptTokenCount + out,
		InputTokensDetails: &upstream.ImageInputDetails{TextTokens: m.PromptTokenCount - inImage, ImageTokens: inImage,
			CachedTokens: m.CachedContentTokenCount},
		OutputTokensDetails: &upstream.ImageOutputDetails{TextTokens: out - outImage, ImageTokens: outImage}}
	if !u.Valid() {
		return nil
	}
	return u
}

func modality(list []modalityCount, name string) int64 {
	var n int64
	for _, m := range list {
		if m.Modality == name {
			n += m.TokenCount
		}
	}
	return n
}

// truncate keeps the first n runes of s.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
