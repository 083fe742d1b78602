// The batch family of the anthropic provider: Anthropic's Message Batches
// API (upstream.BatchProvider), for Messages lines.
//
// Submit: POST {baseURL}/v1/messages/batches {"requests": [{"custom_id",
// "params": the Messages body}]}.
//
// Poll: GET {baseURL}/v1/messages/batches/{id}; processing_status
// in_progress and canceling are running, ended ended (the API has no failed
// batch: a request it refuses is an errored line).
//
// Cancel: POST {baseURL}/v1/messages/batches/{id}/cancel.
//
// Results: GET the batch's results_url, JSONL, one
// {"custom_id", "result": {"type": "succeeded", "message"} | {"type":
// "errored", "error": {"type": "error", "error": {"type", "message"}}} |
// {"type": "canceled"} | {"type": "expired"}} a line.

package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Batch defaults.
const (
	// DefaultBatchResultsTimeout bounds the reading of a batch's results
	// (up to 100,000 answers).
	DefaultBatchResultsTimeout = 10 * time.Minute
	// MaxBatchResultLine bounds one line of the results.
	MaxBatchResultLine = upstream.MaxBody
)

// customIDRule is the API's rule for a request's custom_id. The gateway's
// line IDs (batches.RequestID: "batch_req_" and 24 hex digits, 34
// characters) fit it, so they are sent as they are and the results name
// the lines by them with no mapping; an ID that does not fit is refused
// before anything is sent rather than rewritten, since nothing would carry
// the rewrite from SubmitBatch to BatchResults.
var customIDRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// BatchProtocol implements upstream.BatchProvider: every line is a
// Messages request (the caller translates a chat or responses line).
// Backend option "batch" set to "gateway" runs the lines through the
// gateway instead (an Anthropic-compatible server whose batch API should
// not be used).
func (*Provider) BatchProtocol(b upstream.Backend, client upstream.Protocol) (upstream.Protocol, bool) {
	if b.Options["batch"] == "gateway" || !client.Valid() {
		return "", false
	}
	return upstream.Messages, true
}

// SubmitBatch implements upstream.BatchProvider.
func (p *Provider) SubmitBatch(ctx context.Context, b upstream.Backend, up upstream.Protocol, lines []upstream.BatchLine) (string, error) {
	if up != upstream.Messages {
		return "", upstream.Unsupported("the anthropic provider batches messages lines, not %s", up)
	}
	type request struct {
		CustomID string          `json:"custom_id"`
		Params   json.RawMessage `json:"params"`
	}
	reqs := make([]request, len(lines))
	for i, l := range lines {
		if !customIDRule.MatchString(l.CustomID) {
			return "", upstream.Unsupported("line %d: custom_id %q does not match Anthropic's ^[a-zA-Z0-9_-]{1,64}$", i, l.CustomID)
		}
		reqs[i] = request{CustomID: l.CustomID, Params: l.Body}
	}
	body, err := json.Marshal(map[string]any{"requests": reqs})
	if err != nil {
		return "", upstream.Unsupported("a line's body is not JSON: %v", err)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := p.batchCall(ctx, b, http.MethodPost, batchesURL(b, ""), body, true, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "the upstream's message batch has no id"}
	}
	return out.ID, nil
}

// messageBatch is the part of the API's MessageBatch the adapter reads.
type messageBatch struct {
	ProcessingStatus string `json:"processing_status"`
	ResultsURL       string `json:"results_url"`
}

// BatchStatus implements upstream.BatchProvider.
func (p *Provider) BatchStatus(ctx context.Context, b upstream.Backend, id string) (upstream.BatchJob, error) {
	mb, err := p.getBatch(ctx, b, id)
	if err != nil {
		return upstream.BatchJob{}, err
	}
	return jobOf(mb)
}

func jobOf(mb messageBatch) (upstream.BatchJob, error) {
	switch mb.ProcessingStatus {
	case "in_progress", "canceling":
		return upstream.BatchJob{State: upstream.BatchJobRunning}, nil
	case "ended":
		return upstream.BatchJob{State: upstream.BatchJobEnded}, nil
	}
	return upstream.BatchJob{}, &upstream.Error{Class: upstream.Permanent,
		Message: fmt.Sprintf("the upstream's message batch has an unknown processing_status %q", mb.ProcessingStatus)}
}

func (p *Provider) getBatch(ctx context.Context, b upstream.Backend, id string) (messageBatch, error) {
	var mb messageBatch
	err := p.batchCall(ctx, b, http.MethodGet, batchesURL(b, "/"+url.PathEscape(id)), nil, false, &mb)
	return mb, err
}

// CancelBatch implements upstream.BatchProvider. A refused cancel of a
// batch that has ended is no error: whether the API refuses one is not
// documented, and the answer either way is the same.
func (p *Provider) CancelBatch(ctx context.Context, b upstream.Backend, id string) error {
	err := p.batchCall(ctx, b, http.MethodPost, batchesURL(b, "/"+url.PathEscape(id)+"/cancel"), nil, false, nil)
	if err == nil {
		return nil
	}
	if mb, gerr := p.getBatch(ctx, b, id); gerr == nil && mb.ProcessingStatus == "ended" {
		return nil
	}
	return err
}

// BatchResults implements upstream.BatchProvider: the results of the
// batch's results_url, read a line at a time.
func (p *Provider) BatchResults(ctx context.Context, b upstream.Backend, id string, each func(upstream.BatchAnswer) error) error {
	mb, err := p.getBatch(ctx, b, id)
	if err != nil {
		return err
	}
	if mb.ProcessingStatus != "ended" || mb.ResultsURL == "" {
		return &upstream.Error{Class: upstream.Transient, Retryable: true,
			Message: fmt.Sprintf("the upstream's message batch %s has no results yet (processing_status %q)", id, mb.ProcessingStatus)}
	}
	if err := sameOrigin(b, mb.ResultsURL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultBatchResultsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mb.ResultsURL, nil)
	if err != nil {
		return &upstream.Error{Class: upstream.Permanent, Message: "the upstream's results_url is not a URL", Err: err}
	}
	authorize(req, b, nil)
	req.Header.Set("Accept", "application/x-jsonl")
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return networkError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(resp, false)
	}
	return readResults(resp.Body, each)
}

// sameOrigin refuses a results_url on another host than the backend's
// base URL: the request carries the backend's credential, which goes to
// the upstream it belongs to and nowhere else.
func sameOrigin(b upstream.Backend, results string) error {
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	bu, err1 := url.Parse(base)
	ru, err2 := url.Parse(results)
	if err1 != nil || err2 != nil || bu.Scheme != ru.Scheme || bu.Host != ru.Host {
		return &upstream.Error{Class: upstream.Permanent,
			Message: "the upstream's results_url is not on the backend's host; its credential is not sent there"}
	}
	return nil
}

// batchResult is one line of the results (MessageBatchIndividualResponse).
type batchResult struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	} `json:"result"`
}

func readResults(r io.Reader, each func(upstream.BatchAnswer) error) error {
	var stopped error // each's error, or an unreadable line's: returned as it is
	err := upstream.EachJSONLine(r, MaxBatchResultLine, func(n int, line []byte) error {
		a, err := answerOf(line)
		if err != nil {
			stopped = &upstream.Error{Class: upstream.Permanent,
				Message: fmt.Sprintf("line %d of the upstream's batch results is unreadable: %v", n, err)}
		} else {
			stopped = each(a)
		}
		return stopped
	})
	switch {
	case err == nil || stopped != nil:
		return err
	case errors.Is(err, upstream.ErrBatchLineTooLong):
		return &upstream.Error{Class: upstream.Permanent, Message: "a line of the upstream's batch results is too long"}
	}
	return networkError(err)
}

func answerOf(line []byte) (upstream.BatchAnswer, error) {
	var r batchResult
	if err := json.Unmarshal(line, &r); err != nil {
		return upstream.BatchAnswer{}, err
	}
	if r.CustomID == "" {
		return upstream.BatchAnswer{}, errors.New("no custom_id")
	}
	a := upstream.BatchAnswer{CustomID: r.CustomID}
	switch r.Result.Type {
	case "succeeded":
		if len(r.Result.Message) == 0 {
			return a, errors.New("a succeeded result without its message")
		}
		a.Status, a.Body = http.StatusOK, r.Result.Message
	case "errored":
		// The error is the body a single call would have answered with
		// ({"type":"error","error":{"type","message"}}); its type gives the
		// status the call would have had.
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if len(r.Result.Error) == 0 || json.Unmarshal(r.Result.Error, &e) != nil {
			return a, errors.New("an errored result without its error")
		}
		a.Status, a.Body = errorStatus(e.Error.Type), r.Result.Error
	case "canceled":
		a.NotRun = upstream.NotRunCancelled
	case "expired":
		a.NotRun = upstream.NotRunExpired
	default:
		return a, fmt.Errorf("unknown result type %q", r.Result.Type)
	}
	return a, nil
}

// errorStatus is the HTTP status of an error type
// (https://docs.anthropic.com/en/api/errors); an unknown type is a server
// error.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError
}

func batchesURL(b upstream.Backend, rest string) string {
	base := b.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return upstream.Endpoint(base, "/v1/messages/batches"+rest)
}

// batchCall is one JSON exchange with the batch API under the backend's
// timeout, its answer decoded into out (nil: not read). On submit (the
// batch not created yet), an answer that the route does not exist (404,
// 405, 501) wraps upstream.ErrNoBatchAPI.
func (p *Provider) batchCall(ctx context.Context, b upstream.Backend, method, u string, body []byte, submit bool, out any) error {
	ctx, cancel := context.WithTimeout(ctx, b.TimeoutOr(upstream.DefaultTimeout))
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return &upstream.Error{Class: upstream.Failover, Message: "invalid upstream URL", Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	authorize(req, b, nil)
	resp, err := upstream.RoundTrip(p.client, req)
	if err != nil {
		return networkError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(resp, submit)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, upstream.MaxBody))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, upstream.MaxBody+1))
	if err != nil {
		return networkError(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &upstream.Error{Class: upstream.Permanent, Status: resp.StatusCode, Message: "the upstream's batch answer is not JSON", Err: err}
	}
	return nil
}

// statusError classifies a non-2xx answer as a task exchange's (retried
// later when 408, 429 or 5xx).
func statusError(resp *http.Response, submit bool) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := upstream.StatusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: data}, submit, time.Now())
	e.Body = data
	if submit && upstream.NoBatchAPIStatus(resp.StatusCode) {
		return fmt.Errorf("%w: %w", upstream.ErrNoBatchAPI, e)
	}
	return e
}

func networkError(err error) error {
	msg := "the upstream could not be reached"
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "the upstream did not answer in time"
	}
	return &upstream.Error{Class: upstream.Transient, Message: msg, Retryable: true, Err: err}
}

var _ upstream.BatchProvider = (*Provider)(nil)
