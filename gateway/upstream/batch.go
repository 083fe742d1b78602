package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelgate/modelgate/gateway/translate"
)

// BatchProvider is a TextProvider whose upstream has a batch API of its own
// (OpenAI's Batch API, Anthropic's Message Batches, Bedrock batch
// inference, Vertex AI batch prediction). The Batch controller submits a
// batch's lines there as one job and polls it, instead of sending each line
// through Invoke (docs/batches.md, "Upstream batch APIs").
//
// The lines and answers are in one protocol of the upstream's (the one
// BatchProtocol names), exactly the bodies Send would carry for a single
// call of that protocol, model already rewritten; the provider maps them to
// and from its batch wire format (a JSONL file, an object store, …).
type BatchProvider interface {
	// BatchProtocol is the protocol b's batch API takes a line of the
	// client's protocol in; ok is false when b cannot batch (a model its
	// batch API does not serve, or the backend lacks the settings a batch
	// job needs, such as Bedrock's S3 location): the lines then run through
	// the gateway.
	BatchProtocol(b Backend, client Protocol) (up Protocol, ok bool)
	// SubmitBatch uploads lines and starts one job with them; it returns
	// the job's upstream ID. An upstream that answers it has no batch API
	// (404, 405, 501) gives an error wrapping ErrNoBatchAPI.
	SubmitBatch(ctx context.Context, b Backend, up Protocol, lines []BatchLine) (string, error)
	// BatchStatus reads the job's state.
	BatchStatus(ctx context.Context, b Backend, id string) (BatchJob, error)
	// CancelBatch asks the upstream to stop the job; its lines not run end
	// as NotRun "cancelled" once the job has ended. Cancelling an ended job
	// is not an error.
	CancelBatch(ctx context.Context, b Backend, id string) error
	// BatchResults reads the answers of an ended job, each line once, in
	// any order; a line the upstream reports nothing for is missing (the
	// caller treats it as NotRun "expired"). each's error stops the read.
	BatchResults(ctx context.Context, b Backend, id string, each func(BatchAnswer) error) error
}

// BatchLine is one request of an upstream batch job.
type BatchLine struct {
	// CustomID identifies the line in the job's answers (the gateway uses
	// the line's request ID, batches.RequestID).
	CustomID string
	// Body is the request in the job's protocol, model rewritten, no
	// stream.
	Body []byte
}

// BatchJobState is the coarse state of an upstream batch job.
type BatchJobState string

// The states of a batch job.
const (
	// BatchJobRunning: validating, queued, in progress, finalizing or
	// cancelling.
	BatchJobRunning BatchJobState = "running"
	// BatchJobEnded: completed, cancelled or expired; its answers can be
	// read (BatchResults), the lines not run missing or NotRun.
	BatchJobEnded BatchJobState = "ended"
	// BatchJobFailed: the job failed as a whole (its input refused); no
	// line ran. Message says why.
	BatchJobFailed BatchJobState = "failed"
)

// BatchJob is an upstream job's state.
type BatchJob struct {
	State BatchJobState
	// Message is the upstream's reason for a failed job.
	Message string
}

// BatchAnswer is an upstream job's answer to one line.
type BatchAnswer struct {
	CustomID string
	// Status is 200 with Body the protocol's whole answer (usage
	// included), or the line's error status with Body the upstream's error
	// body; 0 for a line the upstream did not run (NotRun says why).
	Status int
	Body   []byte
	// NotRun is "cancelled" or "expired" for a line the job did not run.
	NotRun string
}

// The NotRun reasons.
const (
	NotRunCancelled = "cancelled"
	NotRunExpired   = "expired"
)

// ErrNoBatchAPI is SubmitBatch's answer when the upstream has no batch API.
var ErrNoBatchAPI = errors.New("the upstream has no batch API")

// NoBatchAPIStatus reports an HTTP status by which an upstream says it has
// no batch API (an OpenAI-compatible server without /v1/batches).
func NoBatchAPIStatus(status int) bool {
	return status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented
}

// BatchBody is the body of one batch line for the upstream protocol up:
// the client's body translated when up is not the client's protocol, else
// passed through with the model rewritten, as Invoke sends it for a single
// call.
func BatchBody(client, up Protocol, clientBody []byte, upstreamModel string) ([]byte, error) {
	if !client.Valid() {
		return nil, fmt.Errorf("upstream: unknown client protocol %q", client)
	}
	body, _, err := upstreamBody(client, up, Request{Protocol: client, Body: clientBody}, upstreamModel, false)
	return body, err
}

// BatchAnswerResult is a batch line's successful answer (raw, in protocol
// up) as Invoke would have returned it to the client: in the client's
// protocol and model, with its usage (estimated when the upstream reported
// none).
func BatchAnswerResult(client, up Protocol, clientBody, raw []byte, clientModel string) (*Result, error) {
	res := &Result{Upstream: up, Translated: up != client}
	var err error
	if up == client {
		res.Usage, res.UsageReported = translate.ResponseUsage(up, raw)
		res.Body, err = translate.SetModel(raw, clientModel)
	} else {
		// The tool map of the request's translation names the tool calls of
		// the answer's.
		var tools *translate.ToolMap
		if _, tools, err = upstreamBody(client, up, Request{Protocol: client, Body: clientBody}, clientModel, false); err != nil {
			return nil, err
		}
		_, res.UsageReported = translate.ResponseUsage(up, raw)
		res.Body, res.Usage, err = translate.TranslateResponse(up, client, raw, clientModel, tools)
	}
	if err != nil {
		return nil, fmt.Errorf("the upstream's batch answer is unreadable: %w", err)
	}
	if !res.UsageReported {
		res.Usage = estimateUsage(up, raw, res.Usage)
	}
	return res, nil
}

// ErrBatchLineTooLong is EachJSONLine's answer for a line longer than its
// bound.
var ErrBatchLineTooLong = errors.New("a line of the batch file is too long")

// EachJSONLine calls fn with each non-blank line of the JSONL in r (space
// trimmed), numbered from 1, reading a line at a time: a batch's results
// can be far larger than what is worth holding. A line over maxLine bytes
// ends the read with ErrBatchLineTooLong; a read error is returned as it
// came, and so is fn's.
func EachJSONLine(r io.Reader, maxLine int, fn func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxLine)), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return ErrBatchLineTooLong
	} else if err != nil {
		return err
	}
	return nil
}
