package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
)

// EmbedRequest is a client's POST /v1/embeddings, in OpenAI's wire format.
type EmbedRequest struct {
	// Body is the client's raw JSON body; a provider that speaks OpenAI's
	// embeddings API forwards it with only the model replaced.
	Body []byte
	// Texts are the input strings, in order; nil when the client sent
	// token arrays, which only OpenAI's wire carries.
	Texts []string
	// Dimensions is the requested vector length; 0: the model's own.
	Dimensions int
	// Base64 is the client's encoding_format "base64".
	Base64 bool
}

// EmbedResult is an upstream's answer to an EmbedRequest.
type EmbedResult struct {
	// Body is a complete OpenAI embeddings response, model not yet
	// rewritten (a provider that speaks OpenAI's wire); nil when Vectors
	// carry the answer.
	Body []byte
	// Vectors are the embeddings, one per input text, as the upstream
	// returned them; the gateway renders them in the client's encoding.
	Vectors [][]float64
	// PromptTokens are the input tokens the upstream billed.
	PromptTokens int64
	// Reported is false when the upstream reports no token count (Gemini):
	// PromptTokens is then 0 and the gateway applies its estimate.
	Reported bool
	// ReportedTotal is the upstream's own total_tokens, when it sent one.
	ReportedTotal *int64
}

// Embedder is the embeddings capability of an adapter.
type Embedder interface {
	// Embed sends req to backend b, whose UpstreamModel names the model,
	// and returns the embeddings. An upstream's refusal is an *Error, as
	// for a text call (Protocol ChatCompletions for an OpenAI-shaped error
	// body the client may see as it is).
	Embed(ctx context.Context, b Backend, req EmbedRequest) (*EmbedResult, error)
}

// Embed runs an embedding call on backend b: the backend's timeout
// (DefaultTimeout without one) bounds it, a transport failure becomes a
// retryable *Error (502, or 504 for the timeout) as Invoke's do, and a
// cancelled ctx returns ctx.Err().
func Embed(ctx context.Context, e Embedder, b Backend, req EmbedRequest) (*EmbedResult, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(b.TimeoutOr(DefaultTimeout), func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	res, err := e.Embed(cctx, b, req)
	switch {
	case err == nil:
		return res, nil
	case timedOut.Load():
		return nil, textError(http.StatusGatewayTimeout, true, "upstream timed out", err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	if _, ok := As(err); ok {
		return nil, err
	}
	return nil, textError(http.StatusBadGateway, true, "upstream connection failed", err)
}

// maxEmbedBody bounds an embeddings answer: 2 048 vectors of 3 072 floats
// in JSON text fit well within it.
const maxEmbedBody = 256 << 20

// ReadJSON reads a JSON answer and closes its body: a 2xx answer's bytes,
// or an error status as an *Error like a text call's (the upstream's body
// and message, protocol p for Error.ClientBody, its Retry-After).
func ReadJSON(resp *http.Response, p Protocol) ([]byte, error) {
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		ue := textStatusError(resp.StatusCode, eb)
		ue.Protocol = p
		ue.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return nil, ue
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxEmbedBody+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxEmbedBody {
		return nil, textError(http.StatusBadGateway, true, "upstream answer too large", nil)
	}
	return raw, nil
}

// BadAnswer is an upstream's 2xx answer the gateway cannot read: the next
// backend is tried.
func BadAnswer(format string, args ...any) *Error {
	return textError(http.StatusBadGateway, true, "upstream sent an unreadable embeddings answer: "+fmt.Sprintf(format, args...), nil)
}

// Refused is a request this backend's wire cannot carry (an input or a
// parameter its API lacks): a 400 with the reason, not retried.
func Refused(format string, args ...any) *Error {
	return textError(http.StatusBadRequest, false, fmt.Sprintf(format, args...), nil)
}

// OpenAIEmbedding reads the usage of an OpenAI embeddings response body,
// for providers that forward the client's call: prompt_tokens, and
// total_tokens when present. The body must hold a data array.
func OpenAIEmbedding(body []byte) (*EmbedResult, error) {
	var v struct {
		Data  []json.RawMessage `json:"data"`
		Usage *struct {
			PromptTokens *int64 `json:"prompt_tokens"`
			TotalTokens  *int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Data == nil {
		return nil, BadAnswer("no data array")
	}
	res := &EmbedResult{Body: body}
	if v.Usage != nil && v.Usage.PromptTokens != nil && *v.Usage.PromptTokens >= 0 {
		res.PromptTokens, res.Reported = *v.Usage.PromptTokens, true
		res.ReportedTotal = v.Usage.TotalTokens
	}
	return res, nil
}

// HeaderCount reads a non-negative integer header (Bedrock's
// X-Amzn-Bedrock-Input-Token-Count).
func HeaderCount(h http.Header, name string) (int64, bool) {
	n, err := strconv.ParseInt(h.Get(name), 10, 64)
	return n, err == nil && n >= 0
}

// SetModel is body with its model member replaced (added when absent).
func SetModel(body []byte, model string) ([]byte, error) {
	return translate.SetModel(body, model)
}
