// The task capability of the openai provider: the OpenAI Images API
// (POST {baseURL}/v1/images/generations), which is synchronous: the answer
// to the submission is the result.
//
// Request: {"model", "prompt", "n", "size"} (plus "quality" and
// "response_format" when the backend's options set them). The contract's
// aspect-ratio sizes are mapped to OpenAI pixel sizes: square → squareSize
// (default 1024x1024), landscape → landscapeSize (default 1536x1024),
// portrait → portraitSize (default 1024x1536), "auto" stays "auto"; explicit
// WIDTHxHEIGHT (or WIDTH*HEIGHT) is sent as WIDTHxHEIGHT. The option "size"
// forces one size.
//
// Answer: {"created", "data": [{"url"} | {"b64_json"}], "usage"?}. URLs
// are returned for the controller to download (they expire after an hour);
// b64_json images are decoded and returned as bytes. Errors have the shape
// {"error": {"message", "type", "param", "code"}}.
//
// Reference images (image_urls) need the edits endpoint, which this adapter
// does not speak: such a task moves to another backend.

package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// DefaultImageTimeout bounds one image generation (OpenAI image models take up to a
// minute or two).
const DefaultImageTimeout = 180 * time.Second

// Default sizes for aspect ratios (GPT image models).
const (
	DefaultSquareSize    = "1024x1024"
	DefaultLandscapeSize = "1536x1024"
	DefaultPortraitSize  = "1024x1536"
)

type request struct {
	Prompt    string   `json:"prompt"`
	N         *int     `json:"n"`
	Size      string   `json:"size"`
	ImageURLs []string `json:"image_urls"`
}

type wireRequest struct {
	Model          string `json:"model,omitempty"`
	Prompt         string `json:"prompt"`
	N              int    `json:"n,omitempty"`
	Size           string `json:"size,omitempty"`
	Quality        string `json:"quality,omitempty"`
	ResponseFormat string `json:"response_format,omitempty"`
}

type wireResponse struct {
	Created int64 `json:"created"`
	Data    []struct {
		URL     string `json:"url"`
		B64JSON string `json:"b64_json"`
	} `json:"data"`
	OutputFormat string               `json:"output_format"`
	Usage        *upstream.ImageUsage `json:"usage"`
}

// Submit implements upstream.TaskAdapter: it generates the images and returns
// them as the final result (videos: videos.go).
func (p *Provider) Submit(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	if c.Kind == upstream.Video {
		return p.submitVideo(ctx, c)
	}
	if err := upstream.CheckBase(c.Backend); err != nil {
		return upstream.Submitted{}, err
	}
	var in request
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	if len(in.ImageURLs) > 0 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (openai) cannot take reference images (image_urls)", c.Backend.Name)
	}
	o := c.Backend.Options
	w := wireRequest{Model: c.Model(), Prompt: in.Prompt, N: 1, Size: Size(in.Size, o),
		Quality: o["quality"], ResponseFormat: o["responseFormat"]}
	if in.N != nil && *in.N > 0 {
		w.N = *in.N
	}
	body, _ := json.Marshal(w)

	ctx, cancel := context.WithTimeout(ctx, c.Backend.TimeoutOr(DefaultImageTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream.Endpoint(c.Backend.BaseURL, "/v1/images/generations"), bytes.NewReader(body))
	if err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Failover, Message: "invalid upstream URL", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if k := strings.TrimSpace(c.Backend.APIKey); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	if v := o["organization"]; v != "" {
		req.Header.Set("OpenAI-Organization", v)
	}
	if v := o["project"]; v != "" {
		req.Header.Set("OpenAI-Project", v)
	}
	x, err := upstream.Do(p.client, req, upstream.Failover)
	if err != nil {
		return upstream.Submitted{}, err
	}
	if x.Status < 200 || x.Status > 299 {
		return upstream.Submitted{}, upstream.StatusError(x, true, time.Now())
	}
	var resp wireResponse
	if err := json.Unmarshal(x.Body, &resp); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's image answer is not valid JSON", Err: err}
	}
	st := upstream.Status{State: upstream.Succeeded, Progress: 100}
	if resp.Usage.Valid() {
		st.Usage = resp.Usage
	}
	ctype := contentType(resp.OutputFormat)
	for i, d := range resp.Data {
		switch {
		case d.B64JSON != "":
			data, err := base64.StdEncoding.DecodeString(d.B64JSON)
			if err != nil {
				return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
					Message: fmt.Sprintf("image %d of the upstream's answer is not valid base64", i), Err: err}
			}
			st.Outputs = append(st.Outputs, upstream.Output{Data: data, ContentType: ctype})
		case d.URL != "":
			st.Outputs = append(st.Outputs, upstream.Output{URL: d.URL})
		}
	}
	if len(st.Outputs) == 0 {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status, Message: "the upstream returned no image"}
	}
	// No ID: the result exists only in this answer, so a submission whose
	// result could not be stored is made again.
	return upstream.Submitted{Final: &st}, nil
}

// Poll implements upstream.TaskAdapter (videos: videos.go). The Images API is synchronous: there is
// no task to poll, so a task found waiting on it lost its result.
func (p *Provider) Poll(ctx context.Context, c upstream.Call, id string) (upstream.Status, error) {
	if c.Kind == upstream.Video {
		return p.pollVideo(ctx, c, id)
	}
	return upstream.Status{}, &upstream.Error{Class: upstream.Permanent,
		Message: "the OpenAI Images API is synchronous and has no task to poll"}
}

// Size maps the contract's size to an OpenAI size.
func Size(size string, o map[string]string) string {
	if v := o["size"]; v != "" {
		return v
	}
	opt := func(k, def string) string {
		if v := o[k]; v != "" {
			return v
		}
		return def
	}
	s := strings.ToLower(strings.TrimSpace(size))
	switch s {
	case "", "1:1":
		return opt("squareSize", DefaultSquareSize)
	case "auto":
		return "auto"
	}
	for _, sep := range []string{"x", "*"} {
		if w, h, ok := strings.Cut(s, sep); ok {
			if _, err1 := strconv.Atoi(w); err1 == nil {
				if _, err2 := strconv.Atoi(h); err2 == nil {
					return w + "x" + h
				}
			}
		}
	}
	if a, b, ok := strings.Cut(s, ":"); ok {
		w, err1 := strconv.ParseFloat(a, 64)
		h, err2 := strconv.ParseFloat(b, 64)
		if err1 == nil && err2 == nil && w > 0 && h > 0 {
			switch {
			case w > h:
				return opt("landscapeSize", DefaultLandscapeSize)
			case w < h:
				return opt("portraitSize", DefaultPortraitSize)
			}
		}
	}
	return opt("squareSize", DefaultSquareSize)
}

func contentType(format string) string {
	switch strings.ToLower(format) {
	case "jpeg", "jpg":
		return "image/jpeg"
	case "webp":
		return "image/webp"
	case "png":
		return "image/png"
	}
	return "" // sniffed by the controller
}

var _ upstream.TaskAdapter = (*Provider)(nil)
