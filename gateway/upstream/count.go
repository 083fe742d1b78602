package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/translate"
)

// TokenCounter is the optional token-counting capability of a text
// provider: the vendor's own count of a request's input tokens, without a
// generation (Anthropic's messages/count_tokens, Gemini's countTokens,
// Bedrock's CountTokens, OpenAI's responses/input_tokens). A provider that
// does not implement it cannot count.
type TokenCounter interface {
	// CountTokens returns the input tokens of body, a messages-protocol
	// request (a Messages body without max_tokens) whose model is already
	// the backend's upstream model. Header carries forwardable client
	// headers (anthropic-version, anthropic-beta). An upstream's refusal is
	// an *Error, as for a text call.
	CountTokens(ctx context.Context, b Backend, body []byte, h http.Header) (int64, error)
}

// CountTokens counts a client's messages-protocol body through provider
// c on backend b: the model set to the backend's upstream model, the
// backend's timeout (DefaultTimeout without one), the client's query
// passed on to a provider that forwards it (WithClientQuery: only a
// same-protocol count does). A transport failure becomes a retryable
// *Error (502, or 504 for the timeout), as Invoke's do; a cancelled ctx
// returns ctx.Err().
func CountTokens(ctx context.Context, c TokenCounter, b Backend, body []byte, h http.Header, query string) (int64, error) {
	body, err := translate.SetModel(body, b.UpstreamModel)
	if err != nil {
		return 0, textError(http.StatusBadRequest, false, err.Error(), err)
	}
	cctx, cancel := context.WithCancel(withClientQuery(ctx, query))
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(b.TimeoutOr(DefaultTimeout), func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	n, err := c.CountTokens(cctx, b, body, h)
	switch {
	case err == nil:
		return n, nil
	case timedOut.Load():
		return 0, textError(http.StatusGatewayTimeout, true, "upstream timed out", err)
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	if _, ok := As(err); ok {
		return 0, err
	}
	return 0, textError(http.StatusBadGateway, true, "upstream connection failed", err)
}

// ReadCount reads the answer of a vendor's count endpoint and closes its
// body: a 2xx answer's integer at keys (input_tokens, totalTokens,
// inputTokens), an error status as an *Error like a text call's (the
// upstream's body and message, the protocol it spoke for Error.ClientBody,
// its Retry-After).
func ReadCount(resp *http.Response, p Protocol, keys ...string) (int64, error) {
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		ue := textStatusError(resp.StatusCode, eb)
		ue.Protocol = p
		ue.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return 0, ue
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return 0, err // the transport's: CountTokens classifies it
	}
	v, ok := translate.FieldRaw(raw, keys...)
	var n int64
	if !ok || json.Unmarshal(v, &n) != nil || n < 0 {
		return 0, textError(http.StatusBadGateway, true, fmt.Sprintf("upstream sent an unreadable token count (no integer %v)", keys), nil)
	}
	return n, nil
}

// RequestError is a count request a provider cannot put in its vendor's
// wire (a translation that failed): a 400 with the reason, not retried,
// as Invoke answers an untranslatable request.
func RequestError(err error) *Error {
	return textError(http.StatusBadRequest, false, err.Error(), err)
}
