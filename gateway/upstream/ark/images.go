// Seedream image generation: POST {base}/api/v3/images/generations,
// synchronous.
//
// Request (from the multi-image family's normalized request): {"model",
// "prompt", "image" (one URL as a string, several as an array), "size"
// (WIDTHxHEIGHT from the ratio and metadata.resolution; the resolution
// keyword 1K/2K/4K for size auto, where the model follows the reference
// image), "sequential_image_generation" ("disabled", or "auto" when n > 1),
// "sequential_image_generation_options": {"max_images"} (at most n: the
// tenant pays for n images), "optimize_prompt_options": {"mode"},
// "response_format" ("url", or the backend option responseFormat
// "b64_json"), "stream": false, "watermark"}.
//
// Answer: {"model", "created", "data": [{"url", "size"} | {"b64_json",
// "size"} | {"error": {"code", "message"}}], "usage": {"generated_images",
// "output_tokens", "total_tokens"}}. An item with an error is an image of a
// group the model did not deliver (moderated); the images delivered are the
// result. URLs (signed TOS links, 24 hours) are downloaded by the
// controller into the blob store; b64_json images are decoded here.

package ark

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// DefaultImageTimeout bounds one image generation (a group of 15 4K images
// takes minutes).
const DefaultImageTimeout = 5 * time.Minute

type imageRequest struct {
	Prompt    string   `json:"prompt"`
	N         *int64   `json:"n"`
	Size      string   `json:"size"`
	ImageURLs []string `json:"image_urls"`
	Metadata  struct {
		Resolution            string `json:"resolution"`
		OptimizePromptOptions *struct {
			Mode string `json:"mode"`
		} `json:"optimize_prompt_options"`
		Sequential        string `json:"sequential_image_generation"`
		SequentialOptions *struct {
			MaxImages *int64 `json:"max_images"`
		} `json:"sequential_image_generation_options"`
		Watermark *bool `json:"watermark"`
	} `json:"metadata"`
}

type wireImageRequest struct {
	Model                 string          `json:"model"`
	Prompt                string          `json:"prompt"`
	Image                 any             `json:"image,omitempty"`
	Size                  string          `json:"size,omitempty"`
	Sequential            string          `json:"sequential_image_generation,omitempty"`
	SequentialOptions     *wireSequential `json:"sequential_image_generation_options,omitempty"`
	OptimizePromptOptions *wireOptimize   `json:"optimize_prompt_options,omitempty"`
	ResponseFormat        string          `json:"response_format"`
	Stream                bool            `json:"stream"`
	Watermark             *bool           `json:"watermark,omitempty"`
}

type wireSequential struct {
	MaxImages int64 `json:"max_images"`
}

type wireOptimize struct {
	Mode string `json:"mode"`
}

type wireImages struct {
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Data    []struct {
		URL     string     `json:"url"`
		B64JSON string     `json:"b64_json"`
		Size    string     `json:"size"`
		Error   *wireError `json:"error"`
	} `json:"data"`
	Usage *struct {
		GeneratedImages int64 `json:"generated_images"`
		OutputTokens    int64 `json:"output_tokens"`
		TotalTokens     int64 `json:"total_tokens"`
	} `json:"usage"`
}

// seedream2K are Seedream's recommended 2K sizes per aspect ratio; 1K is
// half of them and 4K twice (all within Ark's bounds of 1280x720 to
// 4096x4096 pixels in total).
var seedream2K = map[string][2]int{
	"1:1": {2048, 2048}, "4:3": {2304, 1728}, "3:4": {1728, 2304},
	"16:9": {2560, 1440}, "9:16": {1440, 2560}, "3:2": {2496, 1664},
	"2:3": {1664, 2496}, "21:9": {3024, 1296}, "9:21": {1296, 3024},
}

// ImageSize is the Seedream size of a ratio at a resolution (1K, 2K, 4K):
// the contract's pixel sizes where it gives them, Seedream's recommended
// sizes otherwise; "auto" (follow the reference image) is the resolution
// keyword.
func ImageSize(ratio, resolution string) string {
	if resolution == "" {
		resolution = "2K"
	}
	if ratio == "" || strings.EqualFold(ratio, "auto") {
		return resolution
	}
	if w, h, ok := media.MultiImagePixelSize(ratio, resolution); ok {
		return fmt.Sprintf("%dx%d", w, h)
	}
	p, ok := seedream2K[ratio]
	if !ok {
		return resolution
	}
	switch resolution {
	case "1K":
		p = [2]int{p[0] / 2, p[1] / 2}
	case "4K":
		p = [2]int{p[0] * 2, p[1] * 2}
	}
	return fmt.Sprintf("%dx%d", p[0], p[1])
}

func (a Adapter) generateImages(ctx context.Context, c upstream.Call) (upstream.Submitted, error) {
	var in imageRequest
	if err := json.Unmarshal(c.Request, &in); err != nil {
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Message: "the stored request is not a JSON object", Err: err}
	}
	n := max(c.Outputs, 1)
	if in.N != nil && *in.N > 0 {
		n = *in.N
	}
	w := wireImageRequest{Model: c.Model(), Prompt: in.Prompt, Size: ImageSize(in.Size, in.Metadata.Resolution),
		Sequential: "disabled", ResponseFormat: "url", Watermark: in.Metadata.Watermark}
	if v := c.Backend.Options["size"]; v != "" {
		w.Size = v
	}
	if strings.EqualFold(c.Backend.Options["responseFormat"], "b64_json") {
		w.ResponseFormat = "b64_json"
	}
	switch len(in.ImageURLs) {
	case 0:
	case 1:
		w.Image = in.ImageURLs[0]
	default:
		w.Image = in.ImageURLs
	}
	if n > 1 || strings.EqualFold(in.Metadata.Sequential, "auto") {
		// A group of images: the model makes up to max_images; more than
		// the n the tenant pays for is never asked.
		maxImages := n
		if o := in.Metadata.SequentialOptions; o != nil && o.MaxImages != nil && *o.MaxImages > 0 {
			maxImages = min(*o.MaxImages, n)
		}
		w.Sequential, w.SequentialOptions = "auto", &wireSequential{MaxImages: maxImages}
	}
	if o := in.Metadata.OptimizePromptOptions; o != nil && o.Mode != "" {
		w.OptimizePromptOptions = &wireOptimize{Mode: o.Mode}
	}
	body, _ := json.Marshal(w)
	x, err := a.exchange(ctx, c, http.MethodPost, PathImages, body, true, DefaultImageTimeout)
	if err != nil {
		return upstream.Submitted{}, err
	}
	var r wireImages
	if err := json.Unmarshal(x.Body, &r); err != nil {
		// Images were made (and are charged upstream) but cannot be read:
		// another backend would make them again.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's image answer is not valid JSON", Err: err}
	}
	st := imageStatus(&r)
	return upstream.Submitted{Final: &st}, nil
}

// imageStatus turns an images answer into the final status: the delivered
// images, or the failure of the first undelivered one.
func imageStatus(r *wireImages) upstream.Status {
	var outs []upstream.Output
	var refused *wireError
	for _, d := range r.Data {
		switch {
		case d.URL != "":
			outs = append(outs, upstream.Output{URL: d.URL})
		case d.B64JSON != "":
			data, err := base64.StdEncoding.DecodeString(d.B64JSON)
			if err != nil {
				return upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream returned an image that is not valid base64"}
			}
			outs = append(outs, upstream.Output{Data: data, ContentType: http.DetectContentType(data)})
		case d.Error != nil && refused == nil:
			refused = d.Error
		}
	}
	if len(outs) == 0 {
		st := upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream returned no image"}
		if refused != nil {
			st.ErrorMessage, st.ErrorCode = refused.Message, errorCode(refused.Code)
		}
		return st
	}
	st := upstream.Status{State: upstream.Succeeded, Progress: 100, Outputs: outs}
	if u := r.Usage; u != nil && u.TotalTokens >= u.OutputTokens {
		// Seedream bills output tokens only; what else the total counts
		// is input.
		st.Usage = &upstream.ImageUsage{InputTokens: u.TotalTokens - u.OutputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	}
	return st
}
