package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/files"
)

// Files serve OpenAI's Files API for batches: POST, GET and DELETE
// /v1/files and GET /v1/files/{file_id}/content. A file of another tenant
// is the same 404 as a missing one.
type Files struct {
	Files *files.Store
}

// fileObject is OpenAI's file object.
type fileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

func fileObjectOf(f files.File) fileObject {
	o := fileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(),
		Filename: f.Filename, Purpose: f.Purpose, Status: f.Status}
	if !f.ExpiresAt.IsZero() {
		s := f.ExpiresAt.Unix()
		o.ExpiresAt = &s
	}
	return o
}

// openAIPathFail answers an authentication failure on the OpenAI paths of
// files and batches as the text endpoints do.
func openAIPathFail(w http.ResponseWriter, status int, message string) {
	openAIFail(w, status, "invalid_api_key", message)
}

func registerFiles(mux Mux, keys Authenticator, h *Files) {
	mux.Handle("POST /v1/files", authenticated(keys, false, openAIPathFail, h.Create))
	mux.Handle("GET /v1/files", authenticated(keys, false, openAIPathFail, h.List))
	mux.Handle("GET /v1/files/{file_id}", authenticated(keys, false, openAIPathFail, h.Get))
	mux.Handle("DELETE /v1/files/{file_id}", authenticated(keys, false, openAIPathFail, h.Delete))
	mux.Handle("GET /v1/files/{file_id}/content", authenticated(keys, false, openAIPathFail, h.Content))
}

// invalidRequest answers OpenAI's 400 naming the parameter.
func invalidRequest(w http.ResponseWriter, param, message string) {
	apierr.OpenAIParam(w, http.StatusBadRequest, "invalid_request_error", "", param, message)
}

func fileNotFound(w http.ResponseWriter, id string) {
	apierr.OpenAI(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("No such File object: %s", id))
}

// Create streams the multipart file part into the store (never held whole
// in memory). The fields may come in either order: a file that arrives
// before its purpose is stored as a batch file and removed again if the
// purpose turns out to be another.
func (h *Files) Create(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		invalidRequest(w, "", "the request must be multipart/form-data with the fields file and purpose")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.Files.MaxBytes()+multipartOverhead)
	mr, err := r.MultipartReader()
	if err != nil {
		invalidRequest(w, "", "the request must be multipart/form-data with the fields file and purpose")
		return
	}
	var (
		stored  *files.File
		purpose string
		expiry  expiresAfter
	)
	discard := func() {
		if stored == nil {
			return
		}
		if err := h.Files.Delete(context.WithoutCancel(ctx), p.UserID, stored.ID); err != nil {
			log.FromContext(ctx).Error(err, "delete refused file", "file", stored.ID)
		}
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			discard()
			h.badBody(w, err)
			return
		}
		switch part.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, 65))
			if err != nil {
				discard()
				h.badBody(w, err)
				return
			}
			purpose = strings.TrimSpace(string(b))
			if purpose != files.PurposeBatch {
				discard()
				invalidRequest(w, "purpose", fmt.Sprintf("'%s' is not a supported purpose: this gateway takes files with purpose 'batch' only", purpose))
				return
			}
		case "expires_after[anchor]", "expires_after[seconds]":
			b, err := io.ReadAll(io.LimitReader(part, 65))
			if err != nil {
				discard()
				h.badBody(w, err)
				return
			}
			expiry.set(part.FormName(), strings.TrimSpace(string(b)))
		case "file":
			if stored != nil {
				continue
			}
			name := part.FileName()
			if name == "" {
				name = "file"
			}
			f, err := h.Files.Create(ctx, files.Upload{UserID: p.UserID, TokenID: p.TokenID, Purpose: files.PurposeBatch, Filename: name}, part)
			switch {
			case errors.Is(err, files.ErrTooLarge):
				apierr.OpenAIParam(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "file_too_large", "file",
					fmt.Sprintf("the file is larger than the limit of %d bytes", h.Files.MaxBytes()))
				return
			case errors.Is(err, files.ErrEmpty):
				invalidRequest(w, "file", "the file is empty")
				return
			case errors.Is(err, files.ErrInvalid):
				invalidRequest(w, "file", err.Error())
				return
			case errors.Is(err, files.ErrRead):
				h.badBody(w, err)
				return
			case err != nil:
				log.FromContext(ctx).Error(err, "store file")
				openAIFail(w, http.StatusInternalServerError, "", "the file could not be stored; retry")
				return
			}
			stored = &f
		}
	}
	after, param, msg := expiry.duration()
	switch {
	case purpose == "":
		discard()
		invalidRequest(w, "purpose", "purpose is required")
	case stored == nil:
		invalidRequest(w, "file", "file is required")
	case msg != "":
		discard()
		invalidRequest(w, param, msg)
	case after > 0:
		f, err := h.Files.ExpireAfter(ctx, *stored, after)
		if err != nil {
			discard()
			log.FromContext(ctx).Error(err, "set file expiry", "file", stored.ID)
			openAIFail(w, http.StatusInternalServerError, "", "the file could not be stored; retry")
			return
		}
		writeJSON(w, http.StatusOK, fileObjectOf(f))
	default:
		writeJSON(w, http.StatusOK, fileObjectOf(*stored))
	}
}

// expiresAfter is an upload's expires_after object, sent as the form fields
// expires_after[anchor] and expires_after[seconds] (the SDKs' encoding).
type expiresAfter struct {
	anchor, seconds *string
}

func (e *expiresAfter) set(field, value string) {
	if field == "expires_after[anchor]" {
		e.anchor = &value
		return
	}
	e.seconds = &value
}

// Bounds of expires_after.seconds, as OpenAI's Files API sets them.
const (
	minFileExpiry = 3600    // one hour
	maxFileExpiry = 2592000 // 30 days
)

// duration is the expiry the upload asks for (0: none), or the parameter
// and message of why it is refused.
func (e expiresAfter) duration() (time.Duration, string, string) {
	if e.anchor == nil && e.seconds == nil {
		return 0, "", ""
	}
	var seconds *int64
	if e.seconds != nil {
		n, err := strconv.ParseInt(*e.seconds, 10, 64)
		if err != nil {
			n = -1 // not an integer: refused as out of bounds
		}
		seconds = &n
	}
	return checkExpiry("expires_after", e.anchor, seconds)
}

// checkExpiry is the expiry an expires_after object (the upload's, or a
// batch's output_expires_after, named field) asks for, or the parameter and
// message of why it is refused. The anchor may be left out: created_at is
// the only one, and the SDKs default to it.
func checkExpiry(field string, anchor *string, seconds *int64) (time.Duration, string, string) {
	switch {
	case anchor != nil && *anchor != "created_at":
		return 0, field + ".anchor", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'created_at'.", *anchor)
	case seconds == nil:
		return 0, field + ".seconds", field + ".seconds is required"
	case *seconds < minFileExpiry || *seconds > maxFileExpiry:
		return 0, field + ".seconds", fmt.Sprintf("%s.seconds must be an integer between %d (1 hour) and %d (30 days)", field, minFileExpiry, maxFileExpiry)
	}
	return time.Duration(*seconds) * time.Second, "", ""
}

// badBody answers a body that broke off or ran over the request limit.
func (h *Files) badBody(w http.ResponseWriter, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		apierr.OpenAIParam(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "file_too_large", "file",
			fmt.Sprintf("the file is larger than the limit of %d bytes", h.Files.MaxBytes()))
		return
	}
	invalidRequest(w, "", "the multipart body could not be read")
}

// fileList is OpenAI's list object of files.
type fileList struct {
	Object  string       `json:"object"`
	Data    []fileObject `json:"data"`
	FirstID *string      `json:"first_id"`
	LastID  *string      `json:"last_id"`
	HasMore bool         `json:"has_more"`
}

// List answers a page of the tenant's files, newest first unless
// order=asc: after, limit (1 to 10,000, default 10,000) and purpose as
// OpenAI takes them.
func (h *Files) List(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	q := r.URL.Query()
	o := files.ListOptions{After: q.Get("after"), Purpose: q.Get("purpose")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > files.MaxListLimit {
			invalidRequest(w, "limit", fmt.Sprintf("limit must be an integer from 1 to %d", files.MaxListLimit))
			return
		}
		o.Limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		o.Ascending = true
	default:
		invalidRequest(w, "order", "order must be asc or desc")
		return
	}
	list, more, err := h.Files.List(r.Context(), p.UserID, o)
	if errors.Is(err, files.ErrNotFound) {
		invalidRequest(w, "after", fmt.Sprintf("after names no file: %s", o.After))
		return
	}
	if err != nil {
		log.FromContext(r.Context()).Error(err, "list files")
		openAIFail(w, http.StatusServiceUnavailable, "", "the files could not be listed; retry")
		return
	}
	out := fileList{Object: "list", Data: make([]fileObject, len(list)), HasMore: more}
	for i, f := range list {
		out.Data[i] = fileObjectOf(f)
	}
	if len(list) > 0 {
		first, last := list[0].ID, list[len(list)-1].ID
		out.FirstID, out.LastID = &first, &last
	}
	writeJSON(w, http.StatusOK, out)
}

// Get answers the file object.
func (h *Files) Get(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("file_id")
	f, err := h.Files.Get(r.Context(), p.UserID, id)
	if h.failed(w, r, id, err) {
		return
	}
	writeJSON(w, http.StatusOK, fileObjectOf(f))
}

// Content streams the file's bytes.
func (h *Files) Content(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("file_id")
	f, rd, err := h.Files.Open(r.Context(), p.UserID, id)
	if h.failed(w, r, id, err) {
		return
	}
	defer func() { _ = rd.Close() }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, rd); err != nil {
		log.FromContext(r.Context()).V(1).Info("file content cut off", "file", id, "error", err.Error())
	}
}

// Delete removes the file and its bytes.
func (h *Files) Delete(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	id := r.PathValue("file_id")
	if h.failed(w, r, id, h.Files.Delete(r.Context(), p.UserID, id)) {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "file", true})
}

// failed answers err, when there is one, and reports whether it did.
func (h *Files) failed(w http.ResponseWriter, r *http.Request, id string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, files.ErrNotFound):
		fileNotFound(w, id)
	default:
		log.FromContext(r.Context()).Error(err, "file", "file", id)
		openAIFail(w, http.StatusServiceUnavailable, "", "the file could not be read; retry")
	}
	return true
}
