package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/files"
)

const (
	messagesBatchesPath = "/v1/messages/batches"
	// defaultMessageBatchPage and maxMessageBatchPage are Anthropic's
	// page sizes of GET /v1/messages/batches.
	defaultMessageBatchPage = 20
	maxMessageBatchPage     = 1000
)

// customIDPattern is Anthropic's custom_id.
var customIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func registerMessageBatches(mux Mux, keys Authenticator, h *Batches) {
	mux.Handle("POST "+messagesBatchesPath, authenticated(keys, true, messagesFail, h.CreateMessageBatch))
	mux.Handle("GET "+messagesBatchesPath, authenticated(keys, true, messagesFail, h.ListMessageBatches))
	mux.Handle("GET "+messagesBatchesPath+"/{id}", authenticated(keys, true, messagesFail, h.GetMessageBatch))
	mux.Handle("DELETE "+messagesBatchesPath+"/{id}", authenticated(keys, true, messagesFail, h.DeleteMessageBatch))
	mux.Handle("POST "+messagesBatchesPath+"/{id}/cancel", authenticated(keys, true, messagesFail, h.CancelMessageBatch))
	mux.Handle("GET "+messagesBatchesPath+"/{id}/results", authenticated(keys, true, messagesFail, h.MessageBatchResults))
}

// messagesFail writes Anthropic's error shape.
func messagesFail(w http.ResponseWriter, status int, message string) {
	apierr.Messages(w, status, apierr.MessagesType(status), message)
}

func messageBatchNotFound(w http.ResponseWriter, id string) {
	messagesFail(w, http.StatusNotFound, fmt.Sprintf("Message batch %s not found.", id))
}

// requestsError is a request of the body that Anthropic refuses.
type requestsError struct{ msg string }

func (e *requestsError) Error() string { return e.msg }

// CreateMessageBatch stores the requests as a JSONL input file in OpenAI's
// line form ({custom_id, method, url: /v1/messages, body: params}), so the
// controller runs one format, streaming it from the body; then checks it
// like an OpenAI batch's file. An invalid request is a 400 and leaves
// nothing behind.
func (h *Batches) CreateMessageBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	id, err := newBatchID("msgbatch_")
	if err != nil {
		h.messagesFail(w, r, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, h.Files.MaxBytes()+multipartOverhead)
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(writeRequestLines(body, pw))
	}()
	in, err := h.Files.Create(ctx, files.Upload{UserID: p.UserID, TokenID: p.TokenID, Purpose: files.PurposeBatch,
		Filename: id + "_requests.jsonl"}, pr)
	// A store that gave up early stops the writer at its next line; the
	// body is not read once the handler returned.
	_ = pr.Close()
	<-written
	if re, ok := errors.AsType[*requestsError](err); ok {
		messagesFail(w, http.StatusBadRequest, re.msg)
		return
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok || errors.Is(err, files.ErrTooLarge) {
		messagesFail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the requests are larger than the limit of %d bytes", h.Files.MaxBytes()))
		return
	}
	switch {
	case errors.Is(err, files.ErrEmpty):
		messagesFail(w, http.StatusBadRequest, "requests must hold at least one request")
		return
	case errors.Is(err, files.ErrRead):
		messagesFail(w, http.StatusBadRequest, "the body must be a JSON object with a requests array")
		return
	case err != nil:
		h.messagesFail(w, r, err)
		return
	}
	count, inputErr, err := h.validate(ctx, p, in.ID, "/v1/messages", batches.MaxMessageBatchLines)
	if err == nil && inputErr != nil {
		err = &requestsError{msg: requestsMessage(inputErr)}
	}
	if err == nil {
		var b *v1.Batch
		b, err = h.createWithID(ctx, p, id, v1.BatchSpec{API: "anthropic", Endpoint: "/v1/messages", InputFileID: in.ID}, count)
		if err == nil {
			writeJSON(w, http.StatusOK, batches.MessageBatchOf(b, resultsURL(r, id)))
			return
		}
	}
	if derr := h.Files.Delete(context.WithoutCancel(ctx), p.UserID, in.ID); derr != nil {
		log.FromContext(ctx).Error(derr, "delete refused message batch input", "file", in.ID)
	}
	if re, ok := errors.AsType[*requestsError](err); ok {
		messagesFail(w, http.StatusBadRequest, re.msg)
		return
	}
	h.messagesFail(w, r, err)
}

// requestsMessage names the request of an input error by its index.
func requestsMessage(e *batches.InputError) string {
	if e.Line == 0 {
		return e.Message
	}
	return fmt.Sprintf("requests[%d]: %s", e.Line-1, e.Message)
}

// createWithID writes the Batch of an Anthropic message batch whose ID was
// chosen before its input was stored.
func (h *Batches) createWithID(ctx context.Context, p *auth.Principal, id string, spec v1.BatchSpec, count int64) (*v1.Batch, error) {
	return h.createBatch(ctx, p, id, spec, count, nil)
}

// writeRequestLines reads {"requests": [{custom_id, params}, …]} one
// request at a time and writes each as a JSONL line.
func writeRequestLines(body io.Reader, out io.Writer) error {
	dec := json.NewDecoder(body)
	bad := func(format string, a ...any) error { return &requestsError{msg: fmt.Sprintf(format, a...)} }
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad("the body must be a JSON object with a requests array")
	}
	seen := false
	bw := bufio.NewWriterSize(out, 64<<10)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad("the body must be a JSON object with a requests array")
		}
		if t != "requests" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad("the body must be a JSON object with a requests array")
			}
			continue
		}
		seen = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return bad("requests must be an array")
		}
		for i := 0; dec.More(); i++ {
			var req struct {
				CustomID *string         `json:"custom_id"`
				Params   json.RawMessage `json:"params"`
			}
			if err := dec.Decode(&req); err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					return err
				}
				return bad("requests[%d]: must be an object with custom_id and params", i)
			}
			switch {
			case req.CustomID == nil:
				return bad("requests[%d].custom_id: Field required", i)
			case !customIDPattern.MatchString(*req.CustomID):
				return bad("requests[%d].custom_id: must be 1 to 64 letters, digits, hyphens or underscores", i)
			case len(req.Params) == 0 || req.Params[0] != '{':
				return bad("requests[%d].params: must be an object", i)
			}
			line, _ := json.Marshal(struct {
				CustomID string          `json:"custom_id"`
				Method   string          `json:"method"`
				URL      string          `json:"url"`
				Body     json.RawMessage `json:"body"`
			}{*req.CustomID, "POST", "/v1/messages", req.Params})
			if _, err := bw.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return bad("requests must be an array")
		}
	}
	if !seen {
		return bad("requests: Field required")
	}
	return bw.Flush()
}

// resultsURL is where the results of batch id are served, on the address
// the client called.
func resultsURL(r *http.Request, id string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if fp := r.Header.Get("X-Forwarded-Proto"); fp == "http" || fp == "https" {
		scheme = fp
	}
	return scheme + "://" + r.Host + messagesBatchesPath + "/" + id + "/results"
}

// GetMessageBatch answers the message_batch object.
func (h *Batches) GetMessageBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("id")
	b, err := h.lookup(r.Context(), p, "anthropic", id)
	switch {
	case err != nil:
		h.messagesFail(w, r, err)
	case b == nil:
		messageBatchNotFound(w, id)
	default:
		writeJSON(w, http.StatusOK, batches.MessageBatchOf(b, resultsURL(r, id)))
	}
}

// messageBatchList is Anthropic's page of message batches.
type messageBatchList struct {
	Data    []batches.MessageBatch `json:"data"`
	HasMore bool                   `json:"has_more"`
	FirstID *string                `json:"first_id"`
	LastID  *string                `json:"last_id"`
}

// ListMessageBatches answers a page of the tenant's message batches,
// newest first: after_id (the page after that batch), before_id (the page
// before it) and limit (1 to 1000, default 20), as Anthropic takes them.
func (h *Batches) ListMessageBatches(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	q := r.URL.Query()
	limit, ok := pageLimit(q.Get("limit"), defaultMessageBatchPage, maxMessageBatchPage)
	if !ok {
		messagesFail(w, http.StatusBadRequest, fmt.Sprintf("limit: must be an integer from 1 to %d", maxMessageBatchPage))
		return
	}
	before, after := q.Get("before_id"), q.Get("after_id")
	if before != "" && after != "" {
		messagesFail(w, http.StatusBadRequest, "before_id and after_id cannot be given together")
		return
	}
	all, err := h.list(r.Context(), p, "anthropic")
	if err != nil {
		h.messagesFail(w, r, err)
		return
	}
	index := func(id string) int {
		return slices.IndexFunc(all, func(b *v1.Batch) bool { return b.Spec.BatchID == id })
	}
	start, end := 0, min(limit, len(all))
	var more bool
	switch {
	case after != "":
		i := index(after)
		if i < 0 {
			messagesFail(w, http.StatusBadRequest, fmt.Sprintf("after_id: no message batch %s", after))
			return
		}
		start, end = i+1, min(i+1+limit, len(all))
		more = end < len(all)
	case before != "":
		i := index(before)
		if i < 0 {
			messagesFail(w, http.StatusBadRequest, fmt.Sprintf("before_id: no message batch %s", before))
			return
		}
		start, end = max(i-limit, 0), i
		more = start > 0
	default:
		more = end < len(all)
	}
	page := all[start:end]
	out := messageBatchList{Data: make([]batches.MessageBatch, len(page)), HasMore: more}
	for i, b := range page {
		out.Data[i] = batches.MessageBatchOf(b, resultsURL(r, b.Spec.BatchID))
	}
	if len(page) > 0 {
		first, last := page[0].Spec.BatchID, page[len(page)-1].Spec.BatchID
		out.FirstID, out.LastID = &first, &last
	}
	writeJSON(w, http.StatusOK, out)
}

// CancelMessageBatch asks the controller to cancel the batch and answers
// it canceling; an ended batch is answered as it is.
func (h *Batches) CancelMessageBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("id")
	b, err := h.lookup(r.Context(), p, "anthropic", id)
	switch {
	case err != nil:
		h.messagesFail(w, r, err)
		return
	case b == nil:
		messageBatchNotFound(w, id)
		return
	}
	if err := h.requestCancel(r.Context(), b); err != nil {
		h.messagesFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, batches.MessageBatchOf(b, resultsURL(r, id)))
}

// endedMessageBatch is the caller's message batch named by the path once
// it has ended. Otherwise it answers: 404 for none, 400 with "Message batch
// <id> <notEnded>." while it is processing.
func (h *Batches) endedMessageBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal, notEnded string) (*v1.Batch, bool) {
	id := r.PathValue("id")
	b, err := h.lookup(r.Context(), p, "anthropic", id)
	switch {
	case err != nil:
		h.messagesFail(w, r, err)
		return nil, false
	case b == nil:
		messageBatchNotFound(w, id)
		return nil, false
	case batches.ProcessingStatus(b) != batches.ProcessingEnded:
		messagesFail(w, http.StatusBadRequest, fmt.Sprintf("Message batch %s %s.", id, notEnded))
		return nil, false
	}
	return b, true
}

// DeleteMessageBatch removes an ended batch with its input and result
// files; one still processing must be cancelled first (400).
func (h *Batches) DeleteMessageBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	id := r.PathValue("id")
	b, ok := h.endedMessageBatch(w, r, p, "cannot be deleted while it is processing; cancel it first")
	if !ok {
		return
	}
	if err := h.Writer.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
		h.messagesFail(w, r, err)
		return
	}
	for _, f := range []string{b.Spec.InputFileID, b.Status.OutputFileID, b.Status.ErrorFileID} {
		if f == "" {
			continue
		}
		if err := h.Files.Delete(ctx, p.UserID, f); err != nil && !errors.Is(err, files.ErrNotFound) {
			log.FromContext(ctx).Error(err, "delete message batch file", "batch", id, "file", f)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}{id, "message_batch_deleted"})
}

// MessageBatchResults streams the results of an ended batch as JSONL,
// converted line by line from its output and error files. Before the batch
// ended there are none to serve (400, as Anthropic answers).
func (h *Batches) MessageBatchResults(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	id := r.PathValue("id")
	b, ok := h.endedMessageBatch(w, r, p, "has not ended yet; its results are available once processing_status is ended")
	if !ok {
		return
	}
	var readers []io.ReadCloser
	defer func() {
		for _, rd := range readers {
			_ = rd.Close()
		}
	}()
	for _, f := range []string{b.Status.OutputFileID, b.Status.ErrorFileID} {
		if f == "" {
			continue
		}
		_, rd, err := h.Files.Open(ctx, p.UserID, f)
		if err != nil {
			h.messagesFail(w, r, err)
			return
		}
		readers = append(readers, rd)
	}
	w.Header().Set("Content-Type", "application/x-jsonl")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, rd := range readers {
		br := bufio.NewReaderSize(rd, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if t := strings.TrimSpace(string(line)); t != "" {
				var o batches.OutputLine
				if json.Unmarshal([]byte(t), &o) == nil {
					_ = enc.Encode(batches.MessageResultOf(o))
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					log.FromContext(ctx).Error(err, "read message batch results", "batch", id)
				}
				break
			}
		}
	}
}

func (h *Batches) messagesFail(w http.ResponseWriter, r *http.Request, err error) {
	log.FromContext(r.Context()).Error(err, "message batch")
	messagesFail(w, http.StatusInternalServerError, "the message batch could not be processed; retry")
}
