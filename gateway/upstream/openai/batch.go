// The batch family of the openai provider: OpenAI's Batch API
// (upstream.BatchProvider), for chat completions and responses lines.
//
// Submit: the lines as a JSONL file, each line {"custom_id", "method":
// "POST", "url": "/v1/chat/completions" | "/v1/responses", "body"},
// uploaded with POST {baseURL}/v1/files (multipart: purpose=batch, file),
// then POST {baseURL}/v1/batches {"input_file_id", "endpoint",
// "completion_window": "24h", "metadata"}.
//
// Poll: GET {baseURL}/v1/batches/{id}; validating, in_progress, finalizing
// and cancelling are running, completed, cancelled and expired ended,
// failed failed with the batch's errors.data messages.
//
// Cancel: POST {baseURL}/v1/batches/{id}/cancel.
//
// Results: the output file and the error file of the batch (GET
// {baseURL}/v1/files/{id}/content), one JSON line per request {"id",
// "custom_id", "response": {"status_code", "request_id", "body"},
// "error": {"code", "message"}}, read a line at a time.

package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Batch defaults.
const (
	// DefaultBatchTimeout bounds one Batch API exchange but the upload and
	// the reading of the results.
	DefaultBatchTimeout = 60 * time.Second
	// DefaultBatchFileTimeout bounds the upload of the input file and the
	// reading of an output or error file (up to 200 MB each at OpenAI).
	DefaultBatchFileTimeout = 10 * time.Minute
	// BatchCompletionWindow is the only completion window the API takes.
	BatchCompletionWindow = "24h"
	// MaxBatchResultLine bounds one line of an output or error file.
	MaxBatchResultLine = upstream.MaxBody
)

// The error codes of an error file's line for a request the batch did not
// run.
const (
	batchExpiredCode   = "batch_expired"
	batchCancelledCode = "batch_cancelled"
)

// batchEndpoint is the batch endpoint (and each line's url) of a protocol.
func batchEndpoint(up upstream.Protocol) (string, bool) {
	switch up {
	case upstream.ChatCompletions:
		return "/v1/chat/completions", true
	case upstream.Responses:
		return "/v1/responses", true
	}
	return "", false
}

// BatchProtocol implements upstream.BatchProvider: the protocol a single
// call would take (the client's when the backend serves it, else the
// backend's first, chat completions for a messages client). Backend option
// "batch" set to "gateway" runs the lines through the gateway instead (an
// OpenAI-compatible server whose batch API should not be used).
func (p *Provider) BatchProtocol(b upstream.Backend, client upstream.Protocol) (upstream.Protocol, bool) {
	if b.Options["batch"] == "gateway" || !client.Valid() {
		return "", false
	}
	up := upstream.UpstreamProtocolFor(p, b, client)
	_, ok := batchEndpoint(up)
	return up, ok
}

// wireBatchLine is one line of a batch input file.
type wireBatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// wireFile is OpenAI's file object.
type wireFile struct {
	ID string `json:"id"`
}

// wireBatch is OpenAI's batch object.
type wireBatch struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	Errors       *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
}

// wireBatchOutput is one line of a batch output or error file.
type wireBatchOutput struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// SubmitBatch implements upstream.BatchProvider.
func (p *Provider) SubmitBatch(ctx context.Context, b upstream.Backend, up upstream.Protocol, lines []upstream.BatchLine) (string, error) {
	endpoint, ok := batchEndpoint(up)
	if !ok {
		return "", upstream.Unsupported("backend %q (openai) cannot batch protocol %q", b.Name, up)
	}
	if len(lines) == 0 {
		return "", upstream.Unsupported("a batch job needs at least one line")
	}
	fileID, err := p.uploadBatchFile(ctx, b, endpoint, lines)
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]any{
		"input_file_id": fileID, "endpoint": endpoint, "completion_window": BatchCompletionWindow,
		// The job is found among the account's batches by who made it.
		"metadata": map[string]string{"created_by": "modelgate", "backend": b.Name},
	})
	x, err := p.batchExchange(ctx, b, http.MethodPost, "/v1/batches", body, true)
	if err != nil {
		return "", err
	}
	var v wireBatch
	if err := json.Unmarshal(x.Body, &v); err != nil || v.ID == "" {
		return "", &upstream.Error{Class: upstream.Permanent, Status: x.Status, Message: "the upstream's batch answer is not a batch object", Err: err}
	}
	return v.ID, nil
}

// uploadBatchFile uploads the lines as the batch's JSONL input file and
// returns its file ID. The file is written into the request as it is sent,
// never held whole a second time.
func (p *Provider) uploadBatchFile(ctx context.Context, b upstream.Backend, endpoint string, lines []upstream.BatchLine) (string, error) {
	for i, l := range lines {
		if l.CustomID == "" || !json.Valid(l.Body) {
			return "", upstream.Unsupported("batch line %d has no custom ID or no JSON body", i)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultBatchFileTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeBatchFile(mw, endpoint, lines))
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream.Endpoint(baseURL(b), "/v1/files"), pr)
	if err != nil {
		_ = pr.CloseWithError(err)
		return "", &upstream.Error{Class: upstream.Failover, Message: "invalid upstream URL", Err: err}
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	p.authorize(req, b)
	x, err := upstream.Do(p.client, req, upstream.Failover)
	_ = pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the upload ended early
	if err != nil {
		return "", err
	}
	if !x.OK() {
		return "", batchStatusError(x, true)
	}
	var f wireFile
	if err := json.Unmarshal(x.Body, &f); err != nil || f.ID == "" {
		return "", &upstream.Error{Class: upstream.Permanent, Status: x.Status, Message: "the upstream's file answer is not a file object", Err: err}
	}
	return f.ID, nil
}

// writeBatchFile writes the multipart form of the upload: purpose, then the
// JSONL file.
func writeBatchFile(mw *multipart.Writer, endpoint string, lines []upstream.BatchLine) error {
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file", "modelgate-batch.jsonl")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(fw)
	enc := json.NewEncoder(bw) // Encode ends each line with '\n'
	for _, l := range lines {
		if err := enc.Encode(wireBatchLine{CustomID: l.CustomID, Method: http.MethodPost, URL: endpoint, Body: l.Body}); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return mw.Close()
}

// BatchStatus implements upstream.BatchProvider.
func (p *Provider) BatchStatus(ctx context.Context, b upstream.Backend, id string) (upstream.BatchJob, error) {
	v, err := p.getBatch(ctx, b, id)
	if err != nil {
		return upstream.BatchJob{}, err
	}
	switch v.Status {
	case "validating", "in_progress", "finalizing", "cancelling":
		return upstream.BatchJob{State: upstream.BatchJobRunning}, nil
	case "completed", "cancelled", "expired":
		return upstream.BatchJob{State: upstream.BatchJobEnded}, nil
	case "failed":
		return upstream.BatchJob{State: upstream.BatchJobFailed, Message: v.failure()}, nil
	}
	return upstream.BatchJob{}, &upstream.Error{Class: upstream.Transient, Retryable: true,
		Message: fmt.Sprintf("the upstream's batch has an unknown status %q", v.Status)}
}

// failure is a failed batch's reason: its errors' messages, with the input
// line each names.
func (v *wireBatch) failure() string {
	if v.Errors == nil || len(v.Errors.Data) == 0 {
		return "the upstream failed the batch"
	}
	msgs := make([]string, 0, len(v.Errors.Data))
	for _, e := range v.Errors.Data {
		m := e.Message
		if m == "" {
			m = e.Code
		}
		if e.Line != nil {
			m = fmt.Sprintf("line %d: %s", *e.Line, m)
		}
		msgs = append(msgs, m)
	}
	return strings.Join(msgs, "; ")
}

// CancelBatch implements upstream.BatchProvider. The API refuses to cancel
// a batch that has ended; that refusal is not an error.
func (p *Provider) CancelBatch(ctx context.Context, b upstream.Backend, id string) error {
	_, err := p.batchExchange(ctx, b, http.MethodPost, "/v1/batches/"+url.PathEscape(id)+"/cancel", nil, false)
	if err == nil {
		return nil
	}
	if ue, ok := upstream.As(err); !ok || ue.Class != upstream.Permanent {
		return err
	}
	v, gerr := p.getBatch(ctx, b, id)
	if gerr == nil {
		switch v.Status {
		case "completed", "cancelled", "expired", "failed", "cancelling":
			return nil
		}
	}
	return err
}

// BatchResults implements upstream.BatchProvider: the output file (the
// requests that ran) and then the error file (the requests that failed or
// were not run).
func (p *Provider) BatchResults(ctx context.Context, b upstream.Backend, id string, each func(upstream.BatchAnswer) error) error {
	v, err := p.getBatch(ctx, b, id)
	if err != nil {
		return err
	}
	for _, fileID := range []string{v.OutputFileID, v.ErrorFileID} {
		if fileID == "" {
			continue
		}
		if err := p.readBatchFile(ctx, b, fileID, each); err != nil {
			return err
		}
	}
	return nil
}

// readBatchFile reads one output or error file a line at a time.
func (p *Provider) readBatchFile(ctx context.Context, b upstream.Backend, fileID string, each func(upstream.BatchAnswer) error) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultBatchFileTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.Endpoint(baseURL(b), "/v1/files/"+url.PathEscape(fileID)+"/content"), nil)
	if err != nil {
		return &upstream.Error{Class: upstream.Permanent, Message: "invalid upstream URL", Err: err}
	}
	p.authorize(req, b)
	resp, err := p.client.Do(req)
	if err != nil {
		return &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the batch's results could not be read", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return batchStatusError(&upstream.Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}, false)
	}
	var stopped error // each's error, or an unreadable line's: returned as it is
	err = upstream.EachJSONLine(resp.Body, MaxBatchResultLine, func(n int, line []byte) error {
		a, err := batchAnswer(line)
		if err != nil {
			stopped = &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("line %d of the batch's file %s is unreadable", n, fileID), Err: err}
		} else {
			stopped = each(a)
		}
		return stopped
	})
	switch {
	case err == nil || stopped != nil:
		return err
	case errors.Is(err, upstream.ErrBatchLineTooLong):
		return &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("a line of the batch's file %s is too large", fileID), Err: err}
	}
	return &upstream.Error{Class: upstream.Transient, Retryable: true, Message: "the batch's results were cut off", Err: err}
}

// batchAnswer reads one line of an output or error file.
func batchAnswer(line []byte) (upstream.BatchAnswer, error) {
	var o wireBatchOutput
	if err := json.Unmarshal(line, &o); err != nil {
		return upstream.BatchAnswer{}, err
	}
	if o.CustomID == "" {
		return upstream.BatchAnswer{}, errors.New("the line has no custom_id")
	}
	a := upstream.BatchAnswer{CustomID: o.CustomID}
	switch {
	case o.Response != nil && o.Response.StatusCode != 0:
		a.Status, a.Body = o.Response.StatusCode, []byte(o.Response.Body)
	case o.Error != nil && o.Error.Code == batchCancelledCode:
		a.NotRun = upstream.NotRunCancelled
	case o.Error != nil && o.Error.Code == batchExpiredCode:
		a.NotRun = upstream.NotRunExpired
	case o.Error != nil:
		// A request the batch failed without an answer of the endpoint's:
		// the line fails with the batch's message.
		msg := o.Error.Message
		if msg == "" {
			msg = o.Error.Code
		}
		a.Status = http.StatusInternalServerError
		a.Body, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": o.Error.Code}})
	default:
		return upstream.BatchAnswer{}, errors.New("the line has neither a response nor an error")
	}
	return a, nil
}

// getBatch reads a batch object.
func (p *Provider) getBatch(ctx context.Context, b upstream.Backend, id string) (*wireBatch, error) {
	x, err := p.batchExchange(ctx, b, http.MethodGet, "/v1/batches/"+url.PathEscape(id), nil, false)
	if err != nil {
		return nil, err
	}
	var v wireBatch
	if err := json.Unmarshal(x.Body, &v); err != nil {
		return nil, &upstream.Error{Class: upstream.Transient, Status: x.Status, Retryable: true,
			Message: "the upstream's batch answer is not valid JSON", Err: err}
	}
	return &v, nil
}

// batchExchange sends one JSON request of the Batch API and classifies a
// non-2xx answer (submit: nothing was accepted yet).
func (p *Provider) batchExchange(ctx context.Context, b upstream.Backend, method, path string, body []byte, submit bool) (*upstream.Exchange, error) {
	x, err := upstream.TaskRequest{Method: method, URL: upstream.Endpoint(baseURL(b), path), Body: body, Submit: submit,
		Timeout: b.TimeoutOr(DefaultBatchTimeout), Authorize: func(req *http.Request) { p.authorize(req, b) }, Client: p.client}.Send(ctx)
	if err != nil {
		return nil, err
	}
	if !x.OK() {
		return nil, batchStatusError(x, submit)
	}
	return x, nil
}

// batchStatusError classifies a Batch API error answer; on submission, a
// status by which the server says it has no such API wraps
// upstream.ErrNoBatchAPI.
func batchStatusError(x *upstream.Exchange, submit bool) error {
	e := upstream.StatusError(x, submit, time.Now())
	if submit && upstream.NoBatchAPIStatus(x.Status) {
		e.Class, e.Err = upstream.Failover, upstream.ErrNoBatchAPI
	}
	return e
}

// baseURL is the backend's base URL, OpenAI's when it has none.
func baseURL(b upstream.Backend) string {
	if b.BaseURL == "" {
		return DefaultBaseURL
	}
	return b.BaseURL
}

var _ upstream.BatchProvider = (*Provider)(nil)
