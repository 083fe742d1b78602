package upstream

import (
	"context"
	"encoding/json"
	"time"
)

// Kind is the task family: image or video.
type Kind string

// The families.
const (
	Image Kind = "image"
	Video Kind = "video"
)

// Call is one generation task on one backend.
type Call struct {
	Backend Backend
	// Kind is image or video.
	Kind Kind
	// TaskID is the gateway's task ID; adapters use it as the idempotency
	// key upstream where the API has one, so that a submission repeated
	// after a crash finds the first one.
	TaskID string
	// Request is the validated request body (GenerationTask.spec.request),
	// to forward with the model replaced by Backend.UpstreamModel.
	Request json.RawMessage
	// Outputs (images paid for, at least 1), InputImages (reference images)
	// and DurationSeconds (requested video length; 0 or -1: the model
	// decides) are the request's billing facts, for an adapter whose answer
	// depends on them (the simulated one).
	Outputs, InputImages, DurationSeconds int64
	// Elapsed is how long the upstream has had the task (polls only), by
	// the controller's clock.
	Elapsed time.Duration
}

// Model is the model to send upstream: the backend's upstream model, else
// the request's own.
func (c Call) Model() string {
	if c.Backend.UpstreamModel != "" {
		return c.Backend.UpstreamModel
	}
	var body struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(c.Request, &body)
	return body.Model
}

// State is where an upstream task stands.
type State string

// The states.
const (
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
)

// Output is one generated asset: a URL to download (usually short-lived),
// or the bytes themselves.
type Output struct {
	URL         string
	Data        []byte
	ContentType string
}

// Status is what a poll found.
type Status struct {
	State State
	// Progress is 0 to 100 (running only).
	Progress int
	// Outputs are the generated assets (succeeded only).
	Outputs []Output
	// VideoSeconds is the length of a produced video when the upstream
	// reports it; 0 when unknown.
	VideoSeconds int64
	// ErrorMessage says why the upstream failed the task (failed only).
	ErrorMessage string
	// ErrorCode is the upstream's error code for the failure when it gave
	// one as a string (content_policy_violation, moderation_blocked, or
	// CodePolicy from an adapter that classified it); the controller maps it
	// to the task's error code, empty meaning its generic one.
	ErrorCode string
	// RetryAfter is the upstream's requested wait before the next poll; 0
	// when it asked for none.
	RetryAfter time.Duration
	// Usage is the token usage a token-priced image model reports
	// (succeeded only); nil when the upstream reports none.
	Usage *ImageUsage
	// NextPoll, when set, is when the upstream expects the task to have
	// moved on (running only): it replaces the controller's back-off for
	// the next poll.
	NextPoll time.Duration
}

// CodePolicy is the task error code of a generation the upstream refused
// for its content (the contract's content_policy_violation).
const CodePolicy = "content_policy_violation"

// ImageUsage is an image model's token usage as OpenAI's Images API and
// this contract's task object report it.
type ImageUsage struct {
	InputTokens         int64               `json:"input_tokens"`
	OutputTokens        int64               `json:"output_tokens"`
	TotalTokens         int64               `json:"total_tokens"`
	InputTokensDetails  *ImageInputDetails  `json:"input_tokens_details,omitempty"`
	OutputTokensDetails *ImageOutputDetails `json:"output_tokens_details,omitempty"`
}

// ImageInputDetails splits an image model's input tokens.
type ImageInputDetails struct {
	TextTokens   int64 `json:"text_tokens"`
	ImageTokens  int64 `json:"image_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// CachedTokensDetails splits the cached tokens, when the upstream does:
	// cached image tokens have a price of their own.
	CachedTokensDetails *ImageOutputDetails `json:"cached_tokens_details,omitempty"`
}

// ImageOutputDetails splits an image model's output tokens.
type ImageOutputDetails struct {
	TextTokens  int64 `json:"text_tokens"`
	ImageTokens int64 `json:"image_tokens"`
}

// Valid reports whether the figures are usable for billing: not negative,
// and the details (when given) add up to their totals.
func (u *ImageUsage) Valid() bool {
	if u == nil || u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens+u.OutputTokens == 0 {
		return false
	}
	if d := u.InputTokensDetails; d != nil && (d.TextTokens < 0 || d.ImageTokens < 0 || d.TextTokens+d.ImageTokens != u.InputTokens || d.CachedTokens < 0 || d.CachedTokens > u.InputTokens) {
		return false
	}
	if d := u.InputTokensDetails; d != nil && d.CachedTokensDetails != nil {
		c := d.CachedTokensDetails
		if c.TextTokens < 0 || c.ImageTokens < 0 || c.TextTokens+c.ImageTokens != d.CachedTokens || c.TextTokens > d.TextTokens || c.ImageTokens > d.ImageTokens {
			return false
		}
	}
	if d := u.OutputTokensDetails; d != nil && (d.TextTokens < 0 || d.ImageTokens < 0 || d.TextTokens+d.ImageTokens != u.OutputTokens) {
		return false
	}
	return true
}

// Submitted is an accepted submission.
type Submitted struct {
	// ID is the upstream's task ID (empty for a synchronous upstream that
	// has none).
	ID string
	// Final is set when the upstream answered with the final result right
	// away (a synchronous API, or a replay of a task already finished).
	Final *Status
	// NextPoll, when set, is when to poll first (see Status.NextPoll).
	NextPoll time.Duration
}

// TaskAdapter is the image and video capability of an adapter: it
// translates one submission and one poll into the upstream's wire format
// and classifies what went wrong. The GenerationTask controller owns the
// task's life cycle (which backend, when to poll, billing, storing
// outputs).
type TaskAdapter interface {
	// Submit sends the task. An error is an *Error (see Classify).
	Submit(ctx context.Context, c Call) (Submitted, error)
	// Poll asks for the state of an accepted task. An error is an *Error.
	Poll(ctx context.Context, c Call, upstreamID string) (Status, error)
}

// Canceler is a TaskAdapter whose vendor API can cancel an accepted task.
// The GenerationTask controller calls it, best effort, when a task is
// deleted before it finishes; adapters without it leave the upstream task
// to finish on its own (nothing is charged to the tenant either way).
type Canceler interface {
	Cancel(ctx context.Context, c Call, upstreamID string) error
}
