package handlers

import (
	"bytes"
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/translate"
)

// BatchLines runs the lines of a Batch through the text endpoints in
// process: the same parsing, admission (rights, limits, price,
// reservation), routing, translation, failover and usage row as a request
// sent alone, under the line's own request ID, charged at the batch price
// (pricing.Rule.ForBatch). The Batch controller reaches it through the
// composition root, which authenticates the batch's ApiToken (docs/batches.md,
// "Execution").
type BatchLines struct {
	endpoints map[string]principalHandler
	fails     map[string]func(w http.ResponseWriter, status int, code, message string)
	// texts are the text endpoints, whose lines may run on an upstream's
	// batch API (batchupstream.go).
	texts map[string]*Text
}

// NewBatchLines serves batch lines on the text pipelines of text and
// embeddings (nil: that endpoint is not served).
func NewBatchLines(text *TextDeps, embeddings *EmbeddingsDeps) *BatchLines {
	b := &BatchLines{endpoints: map[string]principalHandler{},
		fails: map[string]func(http.ResponseWriter, int, string, string){}, texts: map[string]*Text{}}
	if text != nil {
		for _, t := range []*Text{{text, messagesProtocol()}, {text, chatProtocol()}, {text, responsesProtocol()}} {
			b.endpoints[t.p.path], b.fails[t.p.path], b.texts[t.p.path] = t.serveHTTP, t.p.fail, t
		}
	}
	if embeddings != nil {
		e := newEmbeddings(embeddings)
		b.endpoints[embeddingsPath], b.fails[embeddingsPath] = e.serveHTTP, e.t.p.fail
	}
	return b
}

// LineResult is the answer to one batch line.
type LineResult struct {
	// Status and Body are the endpoint's answer, as a client would have
	// received it.
	Status int
	Body   []byte
	// Billed reports that the line's usage row was made durable, for
	// Quota (at the batch price).
	Billed bool
	Quota  billing.Quota
	// Tokens are what the usage row counts, when Billed.
	Tokens v1.BatchTokens
}

// batchLine marks a request as a batch line (in its requestInfo):
// settlement charges the batch price and records what it charged here.
type batchLine struct {
	billed bool
	quota  billing.Quota
	tokens v1.BatchTokens
}

// Serve runs one line: body sent to endpoint by p, under requestID (the
// line's stable ID, batches.RequestID, which keys its reservation and
// usage row). A streaming line is refused as OpenAI's Batches API refuses
// it: batch answers are whole bodies.
func (b *BatchLines) Serve(ctx context.Context, endpoint string, p *auth.Principal, requestID string, body []byte) LineResult {
	h, ok := b.endpoints[endpoint]
	fail := b.fails[endpoint]
	rec := &lineRecorder{header: http.Header{}}
	switch {
	case !ok:
		openAIFail(rec, http.StatusNotFound, "", "the endpoint "+endpoint+" is not served for batches")
		return rec.result(nil)
	case streams(body):
		fail(rec, http.StatusBadRequest, "", "stream is not supported in a batch: a batch line is answered with a whole body")
		return rec.result(nil)
	}
	line := &batchLine{}
	info := &requestInfo{id: requestID, span: trace.SpanFromContext(ctx), batch: line}
	ctx = context.WithValue(ctx, requestInfoKey{}, info)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		fail(rec, http.StatusBadRequest, "", "the line could not be read")
		return rec.result(nil)
	}
	r.Header.Set("Content-Type", "application/json")
	h(rec, r, p)
	return rec.result(line)
}

// Refuse is the answer to a line refused before it reached an endpoint
// (its key unusable: status and message of an auth.Failure), in the
// endpoint's error shape.
func (b *BatchLines) Refuse(endpoint string, status int, message string) LineResult {
	rec := &lineRecorder{header: http.Header{}}
	fail, ok := b.fails[endpoint]
	if !ok {
		fail = openAIFail
	}
	code := ""
	if status == http.StatusUnauthorized {
		code = "invalid_api_key"
	}
	fail(rec, status, code, message)
	return rec.result(nil)
}

// streams reports a body asking for a stream ("stream": true).
func streams(body []byte) bool {
	raw, ok := translate.FieldRaw(body, "stream")
	return ok && string(bytes.TrimSpace(raw)) == "true"
}

// lineRecorder is the response writer of an in-process line: the status
// and the whole body.
type lineRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *lineRecorder) Header() http.Header { return w.header }

func (w *lineRecorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *lineRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

func (w *lineRecorder) result(line *batchLine) LineResult {
	res := LineResult{Status: w.status, Body: w.body.Bytes()}
	if res.Status == 0 {
		res.Status = http.StatusOK
	}
	if line != nil {
		res.Billed, res.Quota, res.Tokens = line.billed, line.quota, line.tokens
	}
	return res
}
