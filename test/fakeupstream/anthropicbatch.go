package fakeupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Anthropic fake's Message Batches API (POST/GET /v1/messages/batches,
// GET/DELETE /v1/messages/batches/{id}, POST …/{id}/cancel, GET
// …/{id}/results), in the wire format of Anthropic's API reference and its
// Go SDK (MessageBatch, MessageBatchIndividualResponse):
//
//   - a batch starts in_progress and runs its requests one at a time, in
//     order, each through the fake's own POST /v1/messages (so each line is
//     recorded as a request, consumes the script, and carries the fake's
//     usage and its failure injection: Enqueue(Reply{Status: 400}) errors
//     the next line);
//   - request_counts keep every request in processing until the batch
//     ends, as the API documents; then succeeded, errored, canceled and
//     expired;
//   - cancel moves it to canceling: the running request finishes, the ones
//     not started end canceled, then the batch ends;
//   - results_url points at the fake itself and answers JSONL once the
//     batch has ended (400 before, as the API answers).

const messageBatchesPath = "/v1/messages/batches"

// customIDRule is Anthropic's rule for a request's custom_id.
var customIDRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// maxBatchRequests is the API's bound on the requests of one batch.
const maxBatchRequests = 100000

// messageBatches is the state of the Anthropic fake's Message Batches API.
type messageBatches struct {
	mu       sync.Mutex
	disabled bool
	batches  map[string]*messageBatch
	order    []string // creation order
	created  int
	runs     map[string]int // lines run, by custom_id
	delay    time.Duration  // before each line
}

type messageBatch struct {
	id        string
	requests  []batchRequest
	header    http.Header // the creation's credential, version and betas
	results   []json.RawMessage
	counts    map[string]int64
	status    string // in_progress, canceling, ended
	cancel    context.CancelFunc
	createdAt time.Time
	endedAt   time.Time
	cancelAt  time.Time
	ctx       context.Context
	// wake is closed when the batch is stopped, to end a line delay.
	wake chan struct{}
}

type batchRequest struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

// NewAnthropicWithoutBatches starts the Anthropic fake without the Message
// Batches API: its routes answer 404 not_found_error, as an
// Anthropic-compatible server without them does.
func NewAnthropicWithoutBatches() *Server {
	s := NewAnthropic()
	s.messageBatches().disabled = true
	return s
}

// SetMessageBatchLineDelay makes every batch wait d before each of its
// requests (a batch a test can cancel midway).
func (s *Server) SetMessageBatchLineDelay(d time.Duration) {
	mb := s.messageBatches()
	mb.mu.Lock()
	mb.delay = d
	mb.mu.Unlock()
}

// MessageBatchesCreated is the number of message batches created.
func (s *Server) MessageBatchesCreated() int {
	mb := s.messageBatches()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.created
}

// MessageBatchLineRuns is the number of times a batch request with
// customID was run (sent to the messages handler), over every batch.
func (s *Server) MessageBatchLineRuns(customID string) int {
	mb := s.messageBatches()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.runs[customID]
}

// ExpireMessageBatch ends batch id as the API does at its expiry: the
// running request finishes, the ones not started end expired. It reports
// whether the batch exists.
func (s *Server) ExpireMessageBatch(id string) bool {
	mb := s.messageBatches()
	mb.mu.Lock()
	b := mb.batches[id]
	mb.mu.Unlock()
	if b == nil {
		return false
	}
	b.stop(mb, "expired")
	return true
}

// messageBatches is the server's batch state, made on first use.
func (s *Server) messageBatches() *messageBatches {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.msgBatches == nil {
		s.msgBatches = &messageBatches{batches: map[string]*messageBatch{}, runs: map[string]int{}}
	}
	return s.msgBatches
}

func isMessageBatchesPath(p string) bool {
	return p == messageBatchesPath || strings.HasPrefix(p, messageBatchesPath+"/")
}

// messageBatchesOn reports whether the server serves the Message Batches
// API (an Anthropic fake not built without it).
func (s *Server) messageBatchesOn() bool {
	if s.kind != kindAnthropic {
		return false
	}
	mb := s.messageBatches()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return !mb.disabled
}

func (s *Server) serveMessageBatches(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	i := s.record(r, body.Bytes())
	if !s.checkBatchAuth(w, r) {
		s.reject(i)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, messageBatchesPath), "/")
	id, action, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		s.createMessageBatch(w, r, body.Bytes(), i)
	case rest == "" && r.Method == http.MethodGet:
		s.listMessageBatches(w, r)
	case action == "" && r.Method == http.MethodGet:
		s.withMessageBatch(w, id, func(b *messageBatch) { writeJSON(w, http.StatusOK, s.batchObject(b)) })
	case action == "" && r.Method == http.MethodDelete:
		s.deleteMessageBatch(w, id)
	case action == "cancel" && r.Method == http.MethodPost:
		s.withMessageBatch(w, id, func(b *messageBatch) {
			b.stop(s.messageBatches(), "canceled")
			writeJSON(w, http.StatusOK, s.batchObject(b))
		})
	case action == "results" && r.Method == http.MethodGet:
		s.messageBatchResults(w, id)
	default:
		s.reject(i)
		s.writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
	}
}

// checkBatchAuth checks the credential and version headers every call of
// the API needs.
func (s *Server) checkBatchAuth(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header.Get("x-api-key") == "":
		s.writeError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	case r.Header.Get("x-api-key") != s.Key():
		s.writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	case r.Header.Get("anthropic-version") == "":
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
	default:
		return true
	}
	return false
}

// validateBatchRequests checks what the API refuses of a whole batch: no
// requests, too many, a custom_id out of the rule or repeated, a request's
// params that the Messages API would refuse.
func validateBatchRequests(reqs []batchRequest) string {
	if len(reqs) == 0 {
		return "requests: List should have at least 1 item after validation, not 0"
	}
	if len(reqs) > maxBatchRequests {
		return fmt.Sprintf("requests: List should have at most %d items after validation, not %d", maxBatchRequests, len(reqs))
	}
	seen := map[string]bool{}
	for i, rq := range reqs {
		if !customIDRule.MatchString(rq.CustomID) {
			return fmt.Sprintf("requests.%d.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if seen[rq.CustomID] {
			return fmt.Sprintf("requests.%d: Duplicate custom_id: %s", i, rq.CustomID)
		}
		seen[rq.CustomID] = true
		if len(rq.Params) == 0 {
			return fmt.Sprintf("requests.%d.params: Field required", i)
		}
		if msg := validateMessages(rq.Params); msg != "" {
			return fmt.Sprintf("requests.%d.params.%s", i, msg)
		}
	}
	return ""
}

func (s *Server) createMessageBatch(w http.ResponseWriter, r *http.Request, body []byte, i int) {
	var in struct {
		Requests []batchRequest `json:"requests"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		s.reject(i)
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	if msg := validateBatchRequests(in.Requests); msg != "" {
		s.reject(i)
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &messageBatch{id: s.id("msgbatch_"), requests: in.Requests, header: r.Header.Clone(), status: "in_progress",
		counts: map[string]int64{}, createdAt: time.Now().UTC(), ctx: ctx, cancel: cancel, wake: make(chan struct{})}
	mb := s.messageBatches()
	mb.mu.Lock()
	mb.batches[b.id] = b
	mb.order = append(mb.order, b.id)
	mb.created++
	mb.mu.Unlock()
	go s.runMessageBatch(mb, b)
	writeJSON(w, http.StatusOK, s.batchObject(b))
}

// runMessageBatch runs b's requests in order until they are done or the
// batch is stopped (cancelled, expired, the server closed).
func (s *Server) runMessageBatch(mb *messageBatches, b *messageBatch) {
	for _, rq := range b.requests {
		mb.mu.Lock()
		delay := mb.delay
		mb.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-b.wake:
			case <-s.stop:
				return
			}
		}
		mb.mu.Lock()
		if b.status != "in_progress" {
			mb.mu.Unlock()
			break
		}
		mb.runs[rq.CustomID]++
		mb.mu.Unlock()
		result, kind := s.runMessageBatchLine(b, rq)
		line, _ := json.Marshal(map[string]any{"custom_id": rq.CustomID, "result": result})
		mb.mu.Lock()
		b.results = append(b.results, line)
		b.counts[kind]++
		mb.mu.Unlock()
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	reason := "expired"
	if b.status == "canceling" {
		reason = "canceled"
	}
	for _, rq := range b.requests[len(b.results):] {
		line, _ := json.Marshal(map[string]any{"custom_id": rq.CustomID, "result": map[string]any{"type": reason}})
		b.results = append(b.results, line)
		b.counts[reason]++
	}
	b.status, b.endedAt = "ended", time.Now().UTC()
	b.cancel()
}

// runMessageBatchLine sends one request through the fake's messages handler and
// reads its answer as a batch result: succeeded with the message, else
// errored with the API's error body.
func (s *Server) runMessageBatchLine(b *messageBatch, rq batchRequest) (result map[string]any, kind string) {
	req := httptest.NewRequestWithContext(b.ctx, http.MethodPost, "/v1/messages", bytes.NewReader(rq.Params))
	for _, k := range []string{"x-api-key", "anthropic-version", "anthropic-beta"} {
		for _, v := range b.header.Values(k) {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	func() {
		defer func() {
			// A Reset reply aborts the handler: the API reports such a
			// request as errored with an api_error.
			if v := recover(); v != nil {
				rec = httptest.NewRecorder()
				s.writeError(rec, http.StatusInternalServerError, "api_error", "Internal server error")
			}
		}()
		s.serve(rec, req)
	}()
	res := rec.Result()
	body := rec.Body.Bytes()
	switch {
	case res.StatusCode == http.StatusOK && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"):
		return map[string]any{"type": "succeeded", "message": json.RawMessage(body)}, "succeeded"
	case res.StatusCode == http.StatusOK:
		// A streamed answer has no place in a batch.
		return map[string]any{"type": "errored", "error": anthropicErrorBody("invalid_request_error",
			"stream: batch requests cannot be streamed")}, "errored"
	case json.Valid(body) && len(body) > 0:
		return map[string]any{"type": "errored", "error": json.RawMessage(body)}, "errored"
	}
	// A hang cut by a cancel or the server's close.
	return map[string]any{"type": "errored", "error": anthropicErrorBody("api_error", "Internal server error")}, "errored"
}

func anthropicErrorBody(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

// stop ends b's processing with the requests not started ended as reason
// (canceled: through canceling). Stopping an ended batch changes nothing.
func (b *messageBatch) stop(mb *messageBatches, reason string) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if b.status != "in_progress" {
		return
	}
	close(b.wake)
	if reason == "canceled" {
		b.status, b.cancelAt = "canceling", time.Now().UTC()
	} else {
		b.status = "expiring"
	}
}

func (s *Server) withMessageBatch(w http.ResponseWriter, id string, f func(*messageBatch)) {
	mb := s.messageBatches()
	mb.mu.Lock()
	b := mb.batches[id]
	mb.mu.Unlock()
	if b == nil {
		s.writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("Message batch %s not found.", id))
		return
	}
	f(b)
}

// batchObject is the API's MessageBatch.
func (s *Server) batchObject(b *messageBatch) map[string]any {
	mb := s.messageBatches()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return s.batchObjectLocked(b)
}

func (s *Server) batchObjectLocked(b *messageBatch) map[string]any {
	status := b.status
	if status == "expiring" {
		status = "in_progress"
	}
	counts := map[string]int64{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	if status == "ended" {
		for k, n := range b.counts {
			counts[k] = n
		}
	} else {
		counts["processing"] = int64(len(b.requests))
	}
	o := map[string]any{"id": b.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
		"created_at": b.createdAt.Format(time.RFC3339Nano), "expires_at": b.createdAt.Add(24 * time.Hour).Format(time.RFC3339Nano),
		"ended_at": nil, "archived_at": nil, "cancel_initiated_at": nil, "results_url": nil}
	if !b.cancelAt.IsZero() {
		o["cancel_initiated_at"] = b.cancelAt.Format(time.RFC3339Nano)
	}
	if status == "ended" {
		o["ended_at"] = b.endedAt.Format(time.RFC3339Nano)
		o["results_url"] = s.URL + messageBatchesPath + "/" + b.id + "/results"
	}
	return o
}

// listMessageBatches is a page of batches, most recent first (limit 1 to
// 1000, default 20; after_id and before_id cursors).
func (s *Server) listMessageBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "limit: Input should be between 1 and 1000")
			return
		}
		limit = n
	}
	mb := s.messageBatches()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	ids := slices.Clone(mb.order)
	slices.Reverse(ids)
	if after := q.Get("after_id"); after != "" {
		if i := slices.Index(ids, after); i >= 0 {
			ids = ids[i+1:]
		}
	}
	if before := q.Get("before_id"); before != "" {
		if i := slices.Index(ids, before); i >= 0 {
			ids = ids[max(0, i-limit):i]
		}
	}
	more := len(ids) > limit
	ids = ids[:min(limit, len(ids))]
	data := make([]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, s.batchObjectLocked(mb.batches[id]))
	}
	page := map[string]any{"data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(ids) > 0 {
		page["first_id"], page["last_id"] = ids[0], ids[len(ids)-1]
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) deleteMessageBatch(w http.ResponseWriter, id string) {
	s.withMessageBatch(w, id, func(b *messageBatch) {
		mb := s.messageBatches()
		mb.mu.Lock()
		ended := b.status == "ended"
		if ended {
			delete(mb.batches, id)
			mb.order = slices.DeleteFunc(mb.order, func(o string) bool { return o == id })
		}
		mb.mu.Unlock()
		if !ended {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("Message batch %s cannot be deleted while it is processing; cancel it first.", id))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message_batch_deleted"})
	})
}

// messageBatchResults writes an ended batch's results, one JSON object a
// line, in the order the requests ended.
func (s *Server) messageBatchResults(w http.ResponseWriter, id string) {
	s.withMessageBatch(w, id, func(b *messageBatch) {
		mb := s.messageBatches()
		mb.mu.Lock()
		ended := b.status == "ended"
		lines := slices.Clone(b.results)
		mb.mu.Unlock()
		if !ended {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("Message batch %s has not ended yet; its results are available once processing_status is ended.", id))
			return
		}
		w.Header().Set("Content-Type", "application/x-jsonl")
		w.WriteHeader(http.StatusOK)
		for _, l := range lines {
			_, _ = w.Write(append(l, '\n'))
		}
	})
}
