package main

import (
	"crypto/rand"
	"os"
	"path/filepath"

	"github.com/modelgate/modelgate/gateway/blob"
)

// controllerBlobs opens the blob store the GenerationTask controller writes
// generated media to: MODELGATE_BLOB_DIR, else dataDir/blobs (the gateway's
// default), else none (dataDir ""), in which case simulated media tasks fail
// with a clear error. The controller only writes; the gateway signs URLs, so
// the signing key here only has to satisfy the store.
func controllerBlobs(dataDir string) (*blob.Store, error) {
	dir := os.Getenv("MODELGATE_BLOB_DIR")
	if dir == "" && dataDir != "" {
		dir = filepath.Join(dataDir, "blobs")
	}
	if dir == "" {
		return nil, nil
	}
	key := []byte(os.Getenv("MODELGATE_BLOB_SIGNING_KEY"))
	if len(key) < 16 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	return blob.OpenLocal(blob.Config{Dir: dir, SigningKey: key, BaseURL: func() string { return "" }})
}
