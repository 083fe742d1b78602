package openapi

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strings"

	"sigs.k8s.io/yaml"
)

// Path is where the document is served.
const Path = "/openapi.json"

// source is the document as written: YAML, so that it can be read and
// reviewed; clients get it as JSON.
//
//go:embed openapi.yaml
var source []byte

var (
	document []byte
	etag     string
)

func init() {
	var err error
	// The document is embedded: a syntax error is a build defect that the
	// package's tests catch, so failing at start-up is right.
	if document, err = yaml.YAMLToJSON(source); err != nil {
		panic("openapi: the embedded document is not valid YAML: " + err.Error())
	}
	sum := sha256.Sum256(document)
	etag = `"` + hex.EncodeToString(sum[:16]) + `"`
}

// YAML is the document as written.
func YAML() []byte { return source }

// JSON is the document as served.
func JSON() []byte { return document }

// Handler serves the document. It needs no credential and may be cached:
// the ETag changes only when the document does (a new build).
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", "public, max-age=300")
		if matches(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(document)
	})
}

// matches reports whether an If-None-Match list names tag (or is "*").
func matches(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}
