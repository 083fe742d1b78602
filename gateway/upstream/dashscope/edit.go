// The qwen-image-edit models: DashScope's multimodal-generation service,
// chosen by the backend option api: multimodal-generation. It is
// synchronous: the answer to the submission is the result.
//
// Request: POST {baseURL}/api/v1/services/aigc/multimodal-generation/generation,
// "Authorization: Bearer <key>" (no X-DashScope-Async: the service has no
// task), body {"model", "input": {"messages": [{"role": "user", "content":
// [{"image"}, … (1 to 3), {"text"}]}]}, "parameters": {"n", "size": "W*H",
// "negative_prompt", "prompt_extend", "watermark", "seed"}}.
//
// Answer: {"output": {"choices": [{"finish_reason", "message": {"role",
// "content": [{"image"}, …]}}]}, "usage": {"width", "height",
// "image_count"}, "request_id"}. The image URLs are short-lived OSS links
// the controller downloads into the blob store. Errors are the same
// {"request_id", "code", "message"} as the task API's.

package dashscope

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// OptionAPI is the backend option naming the DashScope service a model is
// published on: empty (or APIImageSynthesis) for the image-synthesis task
// API, APIMultimodalGeneration for the synchronous multimodal-generation
// service of the qwen-image-edit models.
const OptionAPI = "api"

// The values of OptionAPI.
const (
	APIImageSynthesis       = "image-synthesis"
	APIMultimodalGeneration = "multimodal-generation"
)

// PathMultimodalGeneration is the multimodal-generation service.
const PathMultimodalGeneration = "/api/v1/services/aigc/multimodal-generation/generation"

// DefaultEditTimeout bounds one synchronous edit (a backend's
// timeoutSeconds overrides it).
const DefaultEditTimeout = 180 * time.Second

type wireEditRequest struct {
	Model      string             `json:"model"`
	Input      wireEditInput      `json:"input"`
	Parameters wireEditParameters `json:"parameters"`
}

type wireEditInput struct {
	Messages []wireMessage `json:"messages"`
}

type wireMessage struct {
	Role    string        `json:"role"`
	Content []wireContent `json:"content"`
}

type wireContent struct {
	Image string `json:"image,omitempty"`
	Text  string `json:"text,omitempty"`
}

type wireEditParameters struct {
	N              *int64 `json:"n,omitempty"`
	Size           string `json:"size,omitempty"`
	NegativePrompt string `json:"negative_prompt,omitempty"`
	PromptExtend   *bool  `json:"prompt_extend,omitempty"`
	Watermark      *bool  `json:"watermark,omitempty"`
	Seed           *int64 `json:"seed,omitempty"`
}

type wireEditAnswer struct {
	RequestID string `json:"request_id"`
	Output    struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content []wireContent `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	} `json:"output"`
	Usage *struct {
		Width      int64 `json:"width"`
		Height     int64 `json:"height"`
		ImageCount int64 `json:"image_count"`
	} `json:"usage"`
}

// submitEdit makes the images on the multimodal-generation service and
// returns them as the final result.
func (a Adapter) submitEdit(ctx context.Context, c upstream.Call, in *request) (upstream.Submitted, error) {
	if len(in.ImageURLs) == 0 {
		return upstream.Submitted{}, upstream.Unsupported("backend %q (dashscope, %s) needs 1 to %d reference images", c.Backend.Name, APIMultimodalGeneration, MaxRefs)
	}
	content := make([]wireContent, 0, len(in.ImageURLs)+1)
	for _, u := range in.ImageURLs {
		content = append(content, wireContent{Image: u})
	}
	content = append(content, wireContent{Text: in.Prompt})
	w := wireEditRequest{Model: c.Model(),
		Input: wireEditInput{Messages: []wireMessage{{Role: "user", Content: content}}},
		Parameters: wireEditParameters{N: in.N, Size: wireSize(in.Size), NegativePrompt: in.Metadata.NegativePrompt,
			PromptExtend: in.Metadata.PromptExtend, Watermark: in.Metadata.Watermark, Seed: in.Metadata.Seed}}
	path := PathMultimodalGeneration
	if p := c.Backend.Options["path"]; p != "" {
		path = p
	}
	body, _ := json.Marshal(w)
	x, err := a.exchange(ctx, c, exchange{method: http.MethodPost, path: path, body: body, submit: true, timeout: DefaultEditTimeout})
	if err != nil {
		return upstream.Submitted{}, err
	}
	var r wireEditAnswer
	if err := json.Unmarshal(x.Body, &r); err != nil {
		// Images were made (and are charged upstream) but cannot be read:
		// another backend would make them again.
		return upstream.Submitted{}, &upstream.Error{Class: upstream.Permanent, Status: x.Status,
			Message: "the upstream's edit answer is not valid JSON", Err: err}
	}
	var outs []upstream.Output
	for _, ch := range r.Output.Choices {
		for _, item := range ch.Message.Content {
			if item.Image != "" {
				outs = append(outs, upstream.Output{URL: item.Image})
			}
		}
	}
	st := upstream.Status{State: upstream.Succeeded, Progress: 100, Outputs: outs}
	if len(outs) == 0 {
		st = upstream.Status{State: upstream.Failed, ErrorMessage: "the upstream finished the edit without an image"}
	}
	// No ID: the result exists only in this answer.
	return upstream.Submitted{Final: &st}, nil
}
