package upstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

// DefaultReferenceTimeout bounds the download of one reference image.
const DefaultReferenceTimeout = 60 * time.Second

// Reference is a reference image's bytes, for an upstream that takes images
// inline instead of by URL.
type Reference struct {
	Data     []byte
	MIMEType string
}

// FetchReference reads a request's reference image (an http(s) URL, or a
// base64 data: URL the gateway stored) for an upstream that wants the bytes.
// URLs go through downloads (Egress.Downloads), like the outputs: the URL is the tenant's
// choice, so only public addresses (and the process's allow-list) are
// reached. At most limit bytes are read. A refused address, a 4xx, an empty
// body, a file that is not an image or one over the limit is the request's
// fault (Permanent); a network failure, 429 or 5xx may pass (Failover,
// retryable: nothing was sent upstream yet).
func FetchReference(ctx context.Context, downloads *http.Client, raw string, limit int64) (Reference, error) {
	if strings.HasPrefix(raw, "data:") {
		return dataReference(raw, limit)
	}
	if !strings.HasPrefix(raw, "https://") && !strings.HasPrefix(raw, "http://") {
		return Reference{}, &Error{Class: Permanent, Message: "a reference image is not an http(s) URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultReferenceTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return Reference{}, &Error{Class: Permanent, Message: "a reference image URL is invalid", Err: err}
	}
	resp, err := downloads.Do(req)
	if errors.Is(err, netguard.ErrForbidden) {
		return Reference{}, &Error{Class: Permanent, Message: "a reference image's address is not allowed: " + netguard.Reason(err)}
	}
	if err != nil {
		// Reason, not err: a transport error names the URL and the address.
		return Reference{}, &Error{Class: Failover, Retryable: true, Message: "a reference image could not be downloaded",
			Err: errors.New(netguard.Reason(err))}
	}
	defer resp.Body.Close()
	switch {
	case RetryableStatus(resp.StatusCode):
		return Reference{}, &Error{Class: Failover, Retryable: true, Message: "a reference image download answered " + resp.Status}
	case resp.StatusCode != http.StatusOK:
		return Reference{}, &Error{Class: Permanent, Message: "a reference image download answered " + resp.Status}
	case resp.ContentLength > limit:
		return Reference{}, tooLarge(limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Reference{}, &Error{Class: Failover, Retryable: true, Message: "a reference image download was cut off"}
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return checkReference(data, ctype, limit)
}

func dataReference(raw string, limit int64) (Reference, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(raw, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return Reference{}, &Error{Class: Permanent, Message: "an inline reference image is not a base64 data URL"}
	}
	if int64(base64.StdEncoding.DecodedLen(len(payload))) > limit+3 {
		return Reference{}, tooLarge(limit)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return Reference{}, &Error{Class: Permanent, Message: "an inline reference image is not valid base64", Err: err}
	}
	return checkReference(data, strings.TrimSuffix(meta, ";base64"), limit)
}

// checkReference keeps an image of at most limit bytes; its type is the
// one declared when it names an image, else the sniffed one.
func checkReference(data []byte, ctype string, limit int64) (Reference, error) {
	switch {
	case int64(len(data)) > limit:
		return Reference{}, tooLarge(limit)
	case len(data) == 0:
		return Reference{}, &Error{Class: Permanent, Message: "a reference image is empty"}
	}
	if !strings.HasPrefix(ctype, "image/") {
		ctype, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if !strings.HasPrefix(ctype, "image/") {
		return Reference{}, &Error{Class: Permanent, Message: "a reference image is not an image (" + ctype + ")"}
	}
	return Reference{Data: data, MIMEType: ctype}, nil
}

func tooLarge(limit int64) *Error {
	return &Error{Class: Permanent, Message: fmt.Sprintf("a reference image is larger than %d bytes", limit)}
}
