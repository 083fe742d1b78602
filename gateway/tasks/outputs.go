package tasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// Output limits: one downloaded output at most, and the outputs kept.
const (
	DefaultMaxImageBytes = 32 << 20
	DefaultMaxVideoBytes = 512 << 20
	maxOutputs           = 16 // status.result.data MaxItems
	downloadTimeout      = 5 * time.Minute
)

// OutputTarget is where a task's outputs are stored: under the tenant's
// prefix, at most Keep of them, each at most MaxBytes.
type OutputTarget struct {
	Namespace, TaskID string
	// Type is the result type, "image" or "video".
	Type     string
	Keep     int
	MaxBytes int64
	// Downloads fetches output URLs: the process's guarded download client
	// (upstream.Egress.Downloads; nil: public addresses only).
	Downloads *http.Client
}

// StoreOutputs copies an upstream's outputs into the blob store (so result
// URLs are ours and signed on query; the upstream's short-lived links never
// reach the client). Keys are fixed per output index, so a retry
// overwrites harmlessly. Errors about an output are *upstream.Error:
// Permanent (the task fails) or Transient (fetched again later).
func StoreOutputs(ctx context.Context, blobs *blob.Store, to OutputTarget, outs []upstream.Output) (*v1.TaskResult, error) {
	keep := min(max(to.Keep, 1), maxOutputs, len(outs))
	res := &v1.TaskResult{Type: to.Type, Data: make([]v1.TaskResultItem, 0, keep)}
	for i, o := range outs[:keep] {
		key, err := storeOutput(ctx, blobs, to, i, o)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		res.Data = append(res.Data, v1.TaskResultItem{URL: BlobScheme + key})
	}
	if len(res.Data) == 0 {
		return nil, &upstream.Error{Class: upstream.Permanent, Message: "the upstream reported no output"}
	}
	return res, nil
}

func storeOutput(ctx context.Context, blobs *blob.Store, to OutputTarget, i int, o upstream.Output) (string, error) {
	if o.Data == nil && strings.HasPrefix(o.URL, "data:") {
		data, ctype, err := decodeDataURL(o.URL)
		if err != nil {
			return "", &upstream.Error{Class: upstream.Permanent, Message: "an inline output is not a valid data URL", Err: err}
		}
		o = upstream.Output{Data: data, ContentType: ctype}
	}
	if o.Data == nil {
		return download(ctx, blobs, to, i, o.URL)
	}
	if int64(len(o.Data)) > to.MaxBytes {
		return "", tooLarge(to.MaxBytes)
	}
	ctype := o.ContentType
	if ctype == "" {
		ctype = http.DetectContentType(o.Data)
	}
	key := BlobKey(to.Namespace, to.TaskID, i, extFor(ctype, ""))
	if _, err := blobs.Put(ctx, key, ctype, bytes.NewReader(o.Data)); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return key, nil
}

// download streams an output URL into the blob store through the guarded
// download client (to.Downloads), at most to.MaxBytes, sniffing the
// content type when the upstream does not name one.
func download(ctx context.Context, blobs *blob.Store, to OutputTarget, i int, u string) (string, error) {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL is not http(s)"}
	}
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL is invalid", Err: err}
	}
	resp, err := upstream.Egress{Downloads: to.Downloads}.DownloadsOr().Do(req)
	if errors.Is(err, netguard.ErrForbidden) {
		return "", &upstream.Error{Class: upstream.Permanent, Message: "an output URL's address is not allowed: " + netguard.Reason(err)}
	}
	if err != nil {
		// Reason, not err: a transport error names the full URL (signed
		// query included) and the address it resolved to, and this one is
		// logged.
		return "", &upstream.Error{Class: upstream.Transient, Message: "the output could not be downloaded", Retryable: true,
			Err: errors.New(netguard.Reason(err))}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return "", &upstream.Error{Class: upstream.Transient, Status: resp.StatusCode, Retryable: true,
			Message: "the output download answered " + resp.Status}
	case resp.StatusCode != http.StatusOK:
		return "", &upstream.Error{Class: upstream.Permanent, Status: resp.StatusCode,
			Message: "the output download answered " + resp.Status}
	case resp.ContentLength > to.MaxBytes:
		return "", tooLarge(to.MaxBytes)
	}
	body := bufio.NewReaderSize(resp.Body, 512)
	ctype := sniff(body, resp.Header.Get("Content-Type"))
	key := BlobKey(to.Namespace, to.TaskID, i, extFor(ctype, req.URL.Path))
	lr := &blob.CapReader{R: body, Left: to.MaxBytes}
	if _, err := blobs.Put(ctx, key, ctype, lr); err != nil {
		if lr.Over {
			return "", tooLarge(to.MaxBytes)
		}
		if lr.ReadErr != nil {
			// No Err: a read error names both ends' addresses, and this one is logged.
			return "", &upstream.Error{Class: upstream.Transient, Message: "the output download was cut off", Retryable: true}
		}
		return "", fmt.Errorf("store: %w", err)
	}
	return key, nil
}

// sniff is the declared content type, or the one the first 512 bytes show
// when none (or application/octet-stream) is declared.
func sniff(body *bufio.Reader, declared string) string {
	ctype, _, _ := mime.ParseMediaType(declared)
	if ctype == "" || ctype == "application/octet-stream" {
		head, _ := body.Peek(512)
		ctype, _, _ = mime.ParseMediaType(http.DetectContentType(head))
	}
	return ctype
}

func tooLarge(limit int64) error {
	return &upstream.Error{Class: upstream.Permanent, Message: fmt.Sprintf("an output is larger than %d bytes", limit)}
}

func decodeDataURL(u string) ([]byte, string, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, "", errors.New("not a base64 data URL")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	return data, strings.TrimSuffix(meta, ";base64"), err
}

// extFor names a file extension for a content type (else the URL path's).
func extFor(ctype, urlPath string) string {
	switch ctype {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/webp":
		return "webp"
	case "image/gif":
		return "gif"
	case "video/mp4":
		return "mp4"
	case "video/webm":
		return "webm"
	case "video/quicktime":
		return "mov"
	}
	if e := strings.TrimPrefix(path.Ext(urlPath), "."); e != "" && len(e) <= 5 && isAlnum(e) {
		return strings.ToLower(e)
	}
	return "bin"
}

func isAlnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
