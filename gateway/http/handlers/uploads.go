package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/gateway/apierr"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/uploads"
)

// Messages of the upload endpoints (HTTP 400 unless noted). The contract
// names the cases and the allowed types; the wording is ours.
const (
	msgImageUnsupported = "unsupported file type: allowed JPEG, PNG, WebP, GIF"
	msgImageTooLarge    = "image larger than 10MB"
	msgAudioUnsupported = "unsupported or invalid audio: allowed MP3, WAV, M4A"
	msgAudioTooLarge    = "audio larger than 50MB"
	msgVideoUnsupported = "unsupported or invalid video: allowed MP4, MOV, WebM"
	msgVideoTooLarge    = "video larger than 100MB"
	msgFileRequired     = "file is required"
	msgNotMultipart     = "request must be multipart/form-data with a file field"
	msgPurposeTooLong   = "purpose must be at most 64 characters"
	msgUploadFailed     = "upload failed" // HTTP 500

	defaultPurpose   = "generation"
	maxPurposeLength = 64
	// DefaultUploadTTL is how long an upload's URL works and the upload is
	// kept, unless Uploads.UploadTTL (--upload-ttl) says otherwise. Uploads
	// feed tasks that may be submitted days later, so they outlive the
	// contract's 24 hours for result URLs (docs/api-choices.md).
	DefaultUploadTTL = 7 * 24 * time.Hour
	// multipartOverhead bounds what a request may carry beyond the file
	// (boundaries, part headers, purpose).
	multipartOverhead = 1 << 20
)

// Uploads serve POST /v1/uploads/images, /audios and /videos.
type Uploads struct {
	// Blobs stores the uploaded files.
	Blobs  *blob.Store
	Ledger UploadLedger
	Clock  clock.PassiveClock
	// UploadTTL is how long an upload's signed URL works and the upload is
	// kept before the sweeper deletes it; default DefaultUploadTTL.
	UploadTTL time.Duration
}

// uploadKind serves the upload endpoint of one kind of file.
type uploadKind struct {
	*Uploads
	Kind        *uploads.Kind
	Unsupported string
	TooLarge    string
}

// uploadView is the contract's upload record.
type uploadView struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	MimeType string `json:"mime_type"`
	Size     int64  `json:"size"`
}

// serveHTTP streams the multipart file part into the blob store (only the
// first few KB are held in memory, to detect the type), records the upload
// and answers its signed URL.
func (h *uploadKind) serveHTTP(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	ctx := r.Context()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		apierr.Simple(w, http.StatusBadRequest, msgNotMultipart)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.Kind.MaxBytes+multipartOverhead)
	mr, err := r.MultipartReader()
	if err != nil {
		apierr.Simple(w, http.StatusBadRequest, msgNotMultipart)
		return
	}

	id, err := newUploadID()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	keyBase := fmt.Sprintf("uploads/%d/%s/%s", p.UserID, h.Kind.Name, id)
	purpose := defaultPurpose
	var obj *uploads.Object
	// The file is written as its part arrives, whatever the order of the
	// fields; a second file part is ignored.
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			h.badBody(w, r, err, obj)
			return
		}
		switch part.FormName() {
		case "file":
			if obj != nil {
				continue
			}
			o, err := uploads.Save(ctx, h.Blobs, h.Kind, keyBase, part)
			switch {
			case errors.Is(err, uploads.ErrUnsupportedType):
				apierr.Simple(w, http.StatusBadRequest, h.Unsupported)
				return
			case errors.Is(err, uploads.ErrTooLarge):
				apierr.Simple(w, http.StatusBadRequest, h.TooLarge)
				return
			case err != nil:
				h.badBody(w, r, err, nil)
				return
			}
			obj = &o
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, maxPurposeLength*4+1))
			if err != nil {
				h.badBody(w, r, err, obj)
				return
			}
			v := strings.TrimSpace(string(b))
			if len([]rune(v)) > maxPurposeLength {
				h.discard(r, obj)
				apierr.Simple(w, http.StatusBadRequest, msgPurposeTooLong)
				return
			}
			if v != "" {
				purpose = v
			}
		}
	}
	if obj == nil {
		apierr.Simple(w, http.StatusBadRequest, msgFileRequired)
		return
	}

	if h.Kind != uploads.Image {
		// Audio and video must be playable files, not only the right
		// magic bytes: their duration is read from the headers, as the
		// 15-second limits of the video models will need it.
		if _, err := storedDuration(ctx, h.Blobs, obj.Key); err != nil {
			h.discard(r, obj)
			if errors.Is(err, mediaduration.ErrUnknown) {
				apierr.Simple(w, http.StatusBadRequest, h.Unsupported)
				return
			}
			h.fail(w, r, err)
			return
		}
	}

	now := h.Clock.Now()
	ttl := h.uploadTTL()
	url, err := h.Blobs.SignedURL(ctx, obj.Key, ttl)
	if err != nil {
		h.discard(r, obj)
		h.fail(w, r, err)
		return
	}
	rec := store.Upload{ID: id, UserID: p.UserID, TokenID: p.TokenID, BlobKey: obj.Key, URL: url,
		MimeType: obj.MimeType, Size: obj.Size, Purpose: purpose, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := h.Ledger.CreateUpload(ctx, rec); err != nil {
		h.discard(r, obj)
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true,
		"message": "",
		"data":    uploadView{ID: id, URL: url, MimeType: obj.MimeType, Size: obj.Size},
	})
}

func (h *uploadKind) uploadTTL() time.Duration {
	if h.UploadTTL > 0 {
		return h.UploadTTL
	}
	return DefaultUploadTTL
}

// badBody answers a body that broke off or ran over the request limit.
func (h *uploadKind) badBody(w http.ResponseWriter, r *http.Request, err error, obj *uploads.Object) {
	h.discard(r, obj)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		apierr.Simple(w, http.StatusBadRequest, h.TooLarge)
		return
	}
	apierr.Simple(w, http.StatusBadRequest, msgNotMultipart)
}

// discard deletes a stored file that will not be recorded.
func (h *uploadKind) discard(r *http.Request, obj *uploads.Object) {
	if obj == nil {
		return
	}
	if err := h.Blobs.Delete(r.Context(), obj.Key); err != nil {
		log.FromContext(r.Context()).Error(err, "delete unrecorded upload", "key", obj.Key)
	}
}

func (h *uploadKind) fail(w http.ResponseWriter, r *http.Request, err error) {
	log.FromContext(r.Context()).Error(err, "upload", "kind", h.Kind.Name)
	apierr.Simple(w, http.StatusInternalServerError, msgUploadFailed)
}

// newUploadID is "upl_" and 128 random bits in hex.
func newUploadID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "upl_" + hex.EncodeToString(b), nil
}

// registerUploads mounts the upload endpoints.
func registerUploads(mux Mux, keys Authenticator, h *Uploads) {
	for path, u := range map[string]*uploadKind{
		"images": {Uploads: h, Kind: uploads.Image, Unsupported: msgImageUnsupported, TooLarge: msgImageTooLarge},
		"audios": {Uploads: h, Kind: uploads.Audio, Unsupported: msgAudioUnsupported, TooLarge: msgAudioTooLarge},
		"videos": {Uploads: h, Kind: uploads.Video, Unsupported: msgVideoUnsupported, TooLarge: msgVideoTooLarge},
	} {
		mux.Handle("POST /v1/uploads/"+path, authenticated(keys, false, simpleFail, u.serveHTTP))
	}
}
