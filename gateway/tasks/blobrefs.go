package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ResolveBlobRefs returns a stored request with every "blob:<key>" value
// (an inline image the gateway stored) replaced by a URL signed for ttl,
// ready to forward to an upstream. A request without such values is
// returned as is.
func ResolveBlobRefs(ctx context.Context, request []byte, blobs Signer, ttl time.Duration) ([]byte, error) {
	if !bytes.Contains(request, []byte(`"`+BlobScheme)) {
		return request, nil
	}
	var v any
	if err := json.Unmarshal(request, &v); err != nil {
		return nil, fmt.Errorf("stored request: %w", err)
	}
	var err error
	v = RewriteStrings(v, func(s string) string {
		key, ok := strings.CutPrefix(s, BlobScheme)
		if !ok || !strings.HasPrefix(key, "tenants/") || err != nil {
			return s
		}
		var signed string
		if signed, err = blobs.SignedURL(ctx, key, ttl); err != nil {
			err = fmt.Errorf("sign stored asset: %w", err)
		}
		return signed
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// RewriteStrings rewrites, in place, every string of a decoded JSON value
// or a normalized request (maps, []any and []string), except free text
// (prompts), which is never a reference; it returns the value.
func RewriteStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case map[string]any:
		for k, e := range x {
			if k == "prompt" || k == "negative_prompt" {
				continue
			}
			x[k] = RewriteStrings(e, fn)
		}
	case []any:
		for i, e := range x {
			x[i] = RewriteStrings(e, fn)
		}
	case []string:
		for i, e := range x {
			x[i] = fn(e)
		}
	}
	return v
}
