package handlers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/batches"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/test/framework"
)

// batchLine is one input line of endpoint for model.
func batchLine(id, endpoint, model string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":%q,"body":{"model":%q,"messages":[{"role":"user","content":"hi"}]}}`+"\n", id, endpoint, model)
}

// uploadBatchFile posts content as a batch file and returns the answer.
func uploadBatchFile(key, content string) (int, map[string]any) {
	return postMultipart("/v1/files", key, formPart{name: "purpose", value: "batch"},
		filePart("in.jsonl", "application/jsonl", []byte(content)))
}

// batchCR reads the Batch of a public batch ID from the API server.
func batchCR(namespace, id string) *v1.Batch {
	b := &v1.Batch{}
	Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace,
		Name: strings.ReplaceAll(id, "_", "-")}, b)).To(Succeed())
	return b
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

var _ = Describe("files and batches", func() {
	var acct, other *framework.Account
	var model string

	BeforeEach(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		other, err = stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		model = pricedTextRoute("batch-chat", "simulated-openai", "default")
	})

	It("stores, lists, serves and deletes a batch file, for its tenant only", func() {
		content := batchLine("a", "/v1/chat/completions", model) + batchLine("b", "/v1/chat/completions", model)
		status, f := uploadBatchFile(acct.Key, content)
		Expect(status).To(Equal(http.StatusOK), "%v", f)
		Expect(f).To(HaveKeyWithValue("object", "file"))
		Expect(f).To(HaveKeyWithValue("purpose", "batch"))
		Expect(f).To(HaveKeyWithValue("filename", "in.jsonl"))
		Expect(f["bytes"]).To(BeEquivalentTo(json.Number(fmt.Sprint(len(content)))))
		id := f["id"].(string)
		Expect(id).To(HavePrefix("file-"))

		status, got, _ := call("GET", "/v1/files/"+id, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(got["id"]).To(Equal(id))

		req, _ := http.NewRequest("GET", stack.BaseURL+"/v1/files/"+id+"/content", nil)
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(string(body)).To(Equal(content))

		status, list, _ := call("GET", "/v1/files?purpose=batch&limit=5", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list).To(HaveKeyWithValue("object", "list"))
		Expect(list["data"]).To(HaveLen(1))
		Expect(list).To(HaveKeyWithValue("first_id", id))

		// Another tenant: 404 on every path, and an empty list.
		for _, m := range []string{"GET /v1/files/" + id, "GET /v1/files/" + id + "/content", "DELETE /v1/files/" + id} {
			method, path, _ := strings.Cut(m, " ")
			status, e, _ := call(method, path, bearer(other.Key), nil)
			Expect(status).To(Equal(http.StatusNotFound), m)
			Expect(errMessage(e)).To(ContainSubstring(id))
		}
		status, list, _ = call("GET", "/v1/files", bearer(other.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(BeEmpty())

		status, del, _ := call("DELETE", "/v1/files/"+id, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(del).To(HaveKeyWithValue("deleted", true))
		status, _, _ = call("GET", "/v1/files/"+id, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusNotFound))
	})

	It("refuses other purposes, empty files and missing fields in OpenAI's shape, keeping nothing", func() {
		status, e := postMultipart("/v1/files", acct.Key, formPart{name: "purpose", value: "fine-tune"},
			filePart("in.jsonl", "application/jsonl", []byte("{}\n")))
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(e["error"]).To(HaveKeyWithValue("param", "purpose"))
		Expect(errMessage(e)).To(ContainSubstring("'batch'"))

		// The purpose after the file: the stored file goes again.
		status, _ = postMultipart("/v1/files", acct.Key, filePart("in.jsonl", "application/jsonl", []byte("{}\n")),
			formPart{name: "purpose", value: "assistants"})
		Expect(status).To(Equal(http.StatusBadRequest))
		status, _ = postMultipart("/v1/files", acct.Key, filePart("in.jsonl", "application/jsonl", []byte("{}\n")))
		Expect(status).To(Equal(http.StatusBadRequest), "no purpose")
		status, _ = postMultipart("/v1/files", acct.Key, formPart{name: "purpose", value: "batch"},
			filePart("in.jsonl", "application/jsonl", nil))
		Expect(status).To(Equal(http.StatusBadRequest), "empty")

		status, list, _ := call("GET", "/v1/files", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(BeEmpty())
	})

	It("refuses a file over the limit with 413, streaming it, and keeps nothing", func() {
		// The stack's limit is the default 200 MB; stream a little more
		// without holding it.
		over := io.LimitReader(&repeatReader{line: []byte(batchLine("x", "/v1/chat/completions", model))}, files.DefaultMaxBytes+1)
		status, e := postMultipart("/v1/files", acct.Key, formPart{name: "purpose", value: "batch"},
			formPart{name: "file", filename: "big.jsonl", contentType: "application/jsonl", body: over})
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%v", e)
		Expect(e["error"]).To(HaveKeyWithValue("code", "file_too_large"))
		status, list, _ := call("GET", "/v1/files", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(BeEmpty())
	})

	It("creates a Batch in the tenant's namespace, lists, gets and cancels it", func() {
		_, f := uploadBatchFile(acct.Key, batchLine("a", "/v1/chat/completions", model))
		status, b, _ := call("POST", "/v1/batches", bearer(acct.Key), map[string]any{
			"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h",
			"metadata": map[string]string{"run": "1"}})
		Expect(status).To(Equal(http.StatusOK), "%v", b)
		id := b["id"].(string)
		Expect(id).To(HavePrefix("batch_"))
		Expect(b).To(HaveKeyWithValue("object", "batch"))
		Expect(b).To(HaveKeyWithValue("status", "validating"))
		Expect(b).To(HaveKeyWithValue("input_file_id", f["id"]))

		cr := batchCR(acct.Namespace, id)
		Expect(cr.Spec).To(MatchFields(acct, id, f["id"].(string)))

		status, got, _ := call("GET", "/v1/batches/"+id, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(got["id"]).To(Equal(id))
		status, list, _ := call("GET", "/v1/batches?limit=1", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(HaveLen(1))
		Expect(list).To(HaveKeyWithValue("has_more", false))

		for _, m := range []string{"GET /v1/batches/" + id, "POST /v1/batches/" + id + "/cancel"} {
			method, path, _ := strings.Cut(m, " ")
			status, _, _ := call(method, path, bearer(other.Key), nil)
			Expect(status).To(Equal(http.StatusNotFound), m)
		}
		status, list, _ = call("GET", "/v1/batches", bearer(other.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(BeEmpty())

		status, c, _ := call("POST", "/v1/batches/"+id+"/cancel", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(c).To(HaveKeyWithValue("status", "cancelling"))
		Expect(c["cancelling_at"]).NotTo(BeNil())
		Expect(batchCR(acct.Namespace, id).Annotations).To(HaveKey(batches.CancelAnnotation))

		// Ended: cancel is refused.
		cr = batchCR(acct.Namespace, id)
		now := metav1.Now()
		cr.Status = v1.BatchStatus{State: v1.BatchCancelled, CancelledAt: &now}
		Expect(stack.Client.Status().Update(ctx, cr)).To(Succeed())
		status, _, _ = call("POST", "/v1/batches/"+id+"/cancel", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusConflict))
	})

	It("fails a batch whose input file is invalid, naming the line, as OpenAI's validation does", func() {
		for name, tc := range map[string]struct{ content, code string }{
			"wrong endpoint": {batchLine("a", "/v1/chat/completions", model) + batchLine("b", "/v1/embeddings", model), "mismatched_endpoint"},
			"duplicate id":   {batchLine("a", "/v1/chat/completions", model) + batchLine("a", "/v1/chat/completions", model), "duplicate_custom_id"},
			"unknown model":  {batchLine("a", "/v1/chat/completions", model) + batchLine("b", "/v1/chat/completions", "no-such-model"), "model_not_found"},
			"not json":       {batchLine("a", "/v1/chat/completions", model) + "{not json\n", "invalid_json_line"},
		} {
			_, f := uploadBatchFile(acct.Key, tc.content)
			status, b, _ := call("POST", "/v1/batches", bearer(acct.Key), map[string]any{
				"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"})
			Expect(status).To(Equal(http.StatusOK), name)
			Expect(b).To(HaveKeyWithValue("status", "failed"), name)
			errs := b["errors"].(map[string]any)["data"].([]any)
			Expect(errs).To(HaveLen(1), name)
			Expect(errs[0]).To(HaveKeyWithValue("code", tc.code), name)
			Expect(errs[0]).To(HaveKeyWithValue("line", json.Number("2")), name)
			Expect(batchCR(acct.Namespace, b["id"].(string)).Status.State).To(Equal(v1.BatchFailed), name)
		}
	})

	It("refuses a bad request with 400 and OpenAI's error shape", func() {
		_, f := uploadBatchFile(acct.Key, batchLine("a", "/v1/chat/completions", model))
		for name, body := range map[string]map[string]any{
			"no file":      {"endpoint": "/v1/chat/completions", "completion_window": "24h"},
			"unknown file": {"input_file_id": "file-nope", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
			"other's file": {"input_file_id": "OTHER", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
			"endpoint":     {"input_file_id": f["id"], "endpoint": "/v1/images/generations", "completion_window": "24h"},
			"window":       {"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "1h"},
		} {
			if body["input_file_id"] == "OTHER" {
				_, of := uploadBatchFile(other.Key, batchLine("a", "/v1/chat/completions", model))
				body["input_file_id"] = of["id"]
			}
			status, e, _ := call("POST", "/v1/batches", bearer(acct.Key), body)
			Expect(status).To(Equal(http.StatusBadRequest), name)
			Expect(e["error"]).To(HaveKeyWithValue("type", "invalid_request_error"), name)
		}
		var l v1.BatchList
		Expect(stack.Client.List(ctx, &l, client.InNamespace(acct.Namespace))).To(Succeed())
		Expect(l.Items).To(BeEmpty(), "nothing created")
	})

	It("pages batches and message batches newest first", func() {
		_, f := uploadBatchFile(acct.Key, batchLine("a", "/v1/chat/completions", model))
		var ids []string
		for range 3 {
			status, b, _ := call("POST", "/v1/batches", bearer(acct.Key), map[string]any{
				"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"})
			Expect(status).To(Equal(http.StatusOK))
			ids = append(ids, b["id"].(string))
		}
		ids = newestFirst(acct.Namespace, ids)
		idsOf := func(page map[string]any) (out []string) {
			for _, d := range page["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return out
		}
		_, page, _ := call("GET", "/v1/batches?limit=2", bearer(acct.Key), nil)
		Expect(idsOf(page)).To(Equal(ids[:2]))
		Expect(page).To(HaveKeyWithValue("has_more", true))
		Expect(page).To(HaveKeyWithValue("last_id", ids[1]))
		_, page, _ = call("GET", "/v1/batches?limit=2&after="+ids[1], bearer(acct.Key), nil)
		Expect(idsOf(page)).To(Equal(ids[2:]))
		Expect(page).To(HaveKeyWithValue("has_more", false))
		status, _, _ := call("GET", "/v1/batches?limit=101", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusBadRequest))

		hdr := map[string]string{"x-api-key": acct.Key}
		var mids []string
		for i := range 3 {
			status, mb, _ := call("POST", "/v1/messages/batches", hdr, map[string]any{"requests": []any{
				map[string]any{"custom_id": fmt.Sprint("r", i), "params": map[string]any{"model": model, "max_tokens": 8,
					"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}}})
			Expect(status).To(Equal(http.StatusOK), "%v", mb)
			mids = append(mids, mb["id"].(string))
		}
		mids = newestFirst(acct.Namespace, mids)
		_, page, _ = call("GET", "/v1/messages/batches?limit=2", hdr, nil)
		Expect(idsOf(page)).To(Equal(mids[:2]))
		Expect(page).To(HaveKeyWithValue("has_more", true))
		_, page, _ = call("GET", "/v1/messages/batches?limit=2&after_id="+mids[1], hdr, nil)
		Expect(idsOf(page)).To(Equal(mids[2:]))
		Expect(page).To(HaveKeyWithValue("has_more", false))
		_, page, _ = call("GET", "/v1/messages/batches?limit=1&before_id="+mids[2], hdr, nil)
		Expect(idsOf(page)).To(Equal(mids[1:2]))
		Expect(page).To(HaveKeyWithValue("has_more", true))
		Expect(page).To(HaveKeyWithValue("first_id", mids[1]))
	})

	It("serves Anthropic message batches on the same resource", func() {
		hdr := map[string]string{"x-api-key": acct.Key, "anthropic-version": "2023-06-01"}
		params := func(m string) map[string]any {
			return map[string]any{"model": m, "max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		}
		status, e, _ := call("POST", "/v1/messages/batches", hdr, map[string]any{"requests": []any{
			map[string]any{"custom_id": "a", "params": params(model)},
			map[string]any{"custom_id": "bad id!", "params": params(model)}}})
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(e).To(HaveKeyWithValue("type", "error"))
		Expect(errMessage(e)).To(ContainSubstring("requests[1].custom_id"))
		status, e, _ = call("POST", "/v1/messages/batches", hdr, map[string]any{"requests": []any{
			map[string]any{"custom_id": "a", "params": params("no-such-model")}}})
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(errMessage(e)).To(ContainSubstring("requests[0]"))
		status, list, _ := call("GET", "/v1/files", bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(list["data"]).To(BeEmpty(), "a refused batch keeps no input file")

		status, mb, _ := call("POST", "/v1/messages/batches", hdr, map[string]any{"requests": []any{
			map[string]any{"custom_id": "a", "params": params(model)},
			map[string]any{"custom_id": "b", "params": params(model)}}})
		Expect(status).To(Equal(http.StatusOK), "%v", mb)
		id := mb["id"].(string)
		Expect(id).To(HavePrefix("msgbatch_"))
		Expect(mb).To(HaveKeyWithValue("type", "message_batch"))
		Expect(mb).To(HaveKeyWithValue("processing_status", "in_progress"))
		Expect(mb["request_counts"]).To(HaveKeyWithValue("processing", json.Number("2")))
		Expect(mb["results_url"]).To(BeNil())

		cr := batchCR(acct.Namespace, id)
		Expect(cr.Spec.API).To(Equal("anthropic"))
		Expect(cr.Spec.Endpoint).To(Equal("/v1/messages"))
		// The input file holds the requests in OpenAI's line form.
		req, _ := http.NewRequest("GET", stack.BaseURL+"/v1/files/"+cr.Spec.InputFileID+"/content", nil)
		req.Header.Set("Authorization", "Bearer "+acct.Key)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		n, err := batches.ParseInput(resp.Body, "/v1/messages", batches.MaxMessageBatchLines, func(batches.Line) error { return nil })
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(int64(2)))

		// The OpenAI paths do not see it, nor does another tenant.
		status, _, _ = call("GET", "/v1/batches/"+id, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, e, _ = call("GET", "/v1/messages/batches/"+id, map[string]string{"x-api-key": other.Key}, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(e["error"]).To(HaveKeyWithValue("type", "not_found_error"))

		status, page, _ := call("GET", "/v1/messages/batches?limit=10", hdr, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(page["data"]).To(HaveLen(1))
		Expect(page).To(HaveKeyWithValue("first_id", id))
		Expect(page).To(HaveKeyWithValue("has_more", false))

		status, _, _ = call("GET", "/v1/messages/batches/"+id+"/results", hdr, nil)
		Expect(status).To(Equal(http.StatusBadRequest), "no results before it ended")
		status, _, _ = call("DELETE", "/v1/messages/batches/"+id, hdr, nil)
		Expect(status).To(Equal(http.StatusBadRequest), "not deleted while processing")

		status, c, _ := call("POST", "/v1/messages/batches/"+id+"/cancel", hdr, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(c).To(HaveKeyWithValue("processing_status", "canceling"))
		Expect(c["cancel_initiated_at"]).NotTo(BeNil())

		// The controller's part, by hand: one answered line, one cancelled.
		out := writeResult(acct, batches.Answered(id, batches.Line{Number: 1, CustomID: "a"}, 200, []byte(`{"type":"message","id":"msg_1"}`)))
		errf := writeResult(acct, batches.Unanswered(id, batches.Line{Number: 2, CustomID: "b"}, batches.CodeCancelled, "cancelled"))
		cr = batchCR(acct.Namespace, id)
		now := metav1.Now()
		cr.Status = v1.BatchStatus{State: v1.BatchCancelled, CancelledAt: &now, OutputFileID: out, ErrorFileID: errf,
			RequestCounts: v1.BatchRequestCounts{Total: 2, Completed: 1}}
		Expect(stack.Client.Status().Update(ctx, cr)).To(Succeed())

		status, got, _ := call("GET", "/v1/messages/batches/"+id, hdr, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(got).To(HaveKeyWithValue("processing_status", "ended"))
		Expect(got["request_counts"]).To(HaveKeyWithValue("canceled", json.Number("1")))
		Expect(got["results_url"]).To(HaveSuffix("/v1/messages/batches/" + id + "/results"))

		req, _ = http.NewRequest("GET", stack.BaseURL+"/v1/messages/batches/"+id+"/results", nil)
		req.Header.Set("x-api-key", acct.Key)
		resp, err = http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		var results []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var r map[string]any
			Expect(json.Unmarshal(sc.Bytes(), &r)).To(Succeed())
			results = append(results, r)
		}
		_ = resp.Body.Close()
		Expect(results).To(HaveLen(2))
		Expect(results[0]).To(HaveKeyWithValue("custom_id", "a"))
		Expect(results[0]["result"]).To(HaveKeyWithValue("type", "succeeded"))
		Expect(results[1]["result"]).To(HaveKeyWithValue("type", "canceled"))

		status, d, _ := call("DELETE", "/v1/messages/batches/"+id, hdr, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(d).To(HaveKeyWithValue("type", "message_batch_deleted"))
		status, _, _ = call("GET", "/v1/messages/batches/"+id, hdr, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _, _ = call("GET", "/v1/files/"+out, bearer(acct.Key), nil)
		Expect(status).To(Equal(http.StatusNotFound), "its files went with it")
	})
})

// newestFirst orders batch IDs as the lists do: by creation (second
// precision) and then by ID, both descending.
func newestFirst(namespace string, ids []string) []string {
	created := map[string]time.Time{}
	for _, id := range ids {
		created[id] = batchCR(namespace, id).CreationTimestamp.Time
	}
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b string) int {
		if c := created[b].Compare(created[a]); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	return out
}

// writeResult stores one result line as the controller would, through the
// stack's files store, and returns the file ID.
func writeResult(acct *framework.Account, line batches.OutputLine) string {
	raw, err := line.AppendJSONL(nil)
	Expect(err).NotTo(HaveOccurred())
	t := &v1.Tenant{}
	Expect(stack.Client.Get(ctx, client.ObjectKeyFromObject(acct.Tenant), t)).To(Succeed())
	f, err := files.New(stack.Ledger, stack.Blobs, files.Options{}).WriteResult(ctx, t.Status.UserID, files.PurposeBatchOutput, "results.jsonl", 0, bytes.NewReader(raw))
	Expect(err).NotTo(HaveOccurred())
	return f.ID
}

// MatchFields checks a Batch spec came from the account's key.
func MatchFields(acct *framework.Account, id, fileID string) OmegaMatcher {
	return And(
		WithTransform(func(s v1.BatchSpec) string { return s.BatchID }, Equal(id)),
		WithTransform(func(s v1.BatchSpec) string { return s.API }, Equal("openai")),
		WithTransform(func(s v1.BatchSpec) string { return s.InputFileID }, Equal(fileID)),
		WithTransform(func(s v1.BatchSpec) string { return s.TokenName }, Equal(acct.Token.Name)),
		WithTransform(func(s v1.BatchSpec) bool { return s.TokenID > 0 && s.UserID > 0 }, BeTrue()),
		WithTransform(func(s v1.BatchSpec) map[string]string { return s.Metadata }, Equal(map[string]string{"run": "1"})),
		WithTransform(func(s v1.BatchSpec) time.Duration { return s.CompletionWindow.Duration }, Equal(24*time.Hour)),
	)
}

// repeatReader repeats line forever.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}
