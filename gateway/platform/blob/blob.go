// Package blob stores uploaded files and generated assets behind one small
// type, on gocloud.dev/blob: a local directory by default (served and signed
// by the gateway itself), cloud buckets by URL in production.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"
)

// FilesPath is where the gateway serves local blobs.
const FilesPath = "/files/"

// ErrNotFound is returned for a key that does not exist.
var ErrNotFound = errors.New("blob not found")

// Config selects and configures the store.
type Config struct {
	// Dir is the directory of the local store.
	Dir string
	// SigningKey signs local URLs (HMAC-SHA256); keep it secret and the same
	// on every replica.
	SigningKey []byte
	// BaseURL returns the gateway's public base URL ("https://api.example.com");
	// signed local URLs point at BaseURL + FilesPath. A function, because a
	// test or dev server knows its address only once it listens.
	BaseURL func() string
}

// Store is a bucket plus the way its objects get public URLs: the local
// store signs links the gateway serves itself (Handler); a cloud store uses
// the bucket's signed URLs or a configured public base URL.
type Store struct {
	bucket     *blob.Bucket
	cfg        Config
	publicBase string

	mu     sync.Mutex
	signer *fileblob.URLSignerHMAC
	base   string
}

// OpenLocal opens (creating) a directory store with signed URLs.
func OpenLocal(cfg Config) (*Store, error) {
	if len(cfg.SigningKey) < 16 {
		return nil, errors.New("blob: the signing key must be at least 16 bytes")
	}
	s := &Store{cfg: cfg}
	b, err := fileblob.OpenBucket(cfg.Dir, &fileblob.Options{
		CreateDir: true, DirFileMode: 0o750, URLSigner: signerFunc{s},
		// Temporary files next to their objects: a rename from os.TempDir
		// fails when the store is on another mount (a volume).
		NoTempDir: true,
	})
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", cfg.Dir, err)
	}
	s.bucket = b
	return s, nil
}

// signerFunc resolves the signer on first use, when the base URL is known.
type signerFunc struct{ s *Store }

func (f signerFunc) URLFromKey(ctx context.Context, key string, opts *driver.SignedURLOptions) (*url.URL, error) {
	return f.s.urlSigner().URLFromKey(ctx, key, opts)
}

func (f signerFunc) KeyFromURL(ctx context.Context, u *url.URL) (string, error) {
	return f.s.urlSigner().KeyFromURL(ctx, u)
}

func (s *Store) urlSigner() *fileblob.URLSignerHMAC {
	base := strings.TrimRight(s.cfg.BaseURL(), "/") + FilesPath
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer == nil || s.base != base {
		u, _ := url.Parse(base)
		s.signer, s.base = fileblob.NewURLSignerHMAC(u, s.cfg.SigningKey), base
	}
	return s.signer
}

// Close closes the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Put writes r under key and returns the bytes written. The write is
// atomic: a failed Put leaves no partial object.
func (s *Store) Put(ctx context.Context, key, contentType string, r io.Reader) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType})
	if err != nil {
		return 0, fmt.Errorf("blob: put %s: %w", key, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		cancelWriter(cancel, w)
		return n, fmt.Errorf("blob: write %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("blob: close %s: %w", key, err)
	}
	return n, nil
}

// cancelWriter abandons a write: closing a writer whose context is done
// discards it, so the object is never created. (Closing it with a live
// context would commit the partial object.)
func cancelWriter(cancel context.CancelFunc, w *blob.Writer) {
	cancel()
	_ = w.Close()
}

// Local reports whether the gateway itself serves the store's objects.
func (s *Store) Local() bool { return s.cfg.BaseURL != nil }

// SignedURL returns a URL that serves key until ttl from now (a public base
// URL, when configured, serves it for as long as the object exists).
func (s *Store) SignedURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if s.publicBase != "" {
		return s.publicBase + "/" + key, nil
	}
	u, err := s.bucket.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: ttl, Method: http.MethodGet})
	if err != nil {
		return "", fmt.Errorf("blob: sign %s: %w", key, err)
	}
	return u, nil
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	return nil
}

// Open reads key.
func (s *Store) Open(ctx context.Context, key string) (*blob.Reader, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, ErrNotFound
	}
	return r, err
}

// KeyOfLink returns the key a link of this store names: a valid, unexpired
// signed local link, or a link under the public base URL. ok is false for
// any other URL (a cloud store's own signed URLs are not recognised).
func (s *Store) KeyOfLink(ctx context.Context, rawURL string) (key string, ok bool) {
	if s.publicBase != "" {
		k, found := strings.CutPrefix(rawURL, s.publicBase+"/")
		return k, found && k != ""
	}
	if prefix := s.LocalPrefix(); prefix == "" || !strings.HasPrefix(rawURL, prefix) {
		return "", false
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	key, err = s.urlSigner().KeyFromURL(ctx, u)
	return key, err == nil
}

// LocalPrefix is where this local store's signed links start (base URL +
// FilesPath); "" for a cloud store.
func (s *Store) LocalPrefix() string {
	if !s.Local() {
		return ""
	}
	return strings.TrimRight(s.cfg.BaseURL(), "/") + FilesPath
}

// Handler serves signed local URLs under FilesPath: the signature and expiry
// are checked, then the object is streamed with its content type. An
// altered or expired URL is 403; a deleted object 404.
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := *r.URL
		base, _ := url.Parse(strings.TrimRight(s.cfg.BaseURL(), "/") + FilesPath)
		u.Scheme, u.Host, u.Path = base.Scheme, base.Host, base.Path
		key, err := s.urlSigner().KeyFromURL(r.Context(), &u)
		if err != nil {
			http.Error(w, "invalid or expired link", http.StatusForbidden)
			return
		}
		rd, err := s.Open(r.Context(), key)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		defer rd.Close()
		w.Header().Set("Content-Type", rd.ContentType())
		w.Header().Set("Content-Length", fmt.Sprint(rd.Size()))
		w.Header().Set("Cache-Control", "private, max-age=300")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.Copy(w, rd)
	})
}
