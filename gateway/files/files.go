package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/utils/clock"

	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
)

// Purposes of a file, as OpenAI names them.
const (
	// PurposeBatch is a batch input file, uploaded by the tenant.
	PurposeBatch = "batch"
	// PurposeBatchOutput is a batch's output or error file, written by
	// the batch controller.
	PurposeBatchOutput = "batch_output"
)

// Defaults, as OpenAI sets them for batch files.
const (
	// DefaultMaxBytes is the largest batch input file (200 MB).
	DefaultMaxBytes = 200 << 20
	// DefaultTTL is how long a batch file is kept: 30 days after its
	// creation, OpenAI's default expiry for purpose=batch.
	DefaultTTL = 30 * 24 * time.Hour
	// MaxFilenameLen bounds a filename.
	MaxFilenameLen = 255
	// MaxListLimit is the largest page List returns (OpenAI's 10,000).
	MaxListLimit = 10000
)

// contentType is what the blobs are stored as: the batch formats are JSONL.
const contentType = "application/jsonl"

var (
	// ErrNotFound: no such file for this tenant (another tenant's file is
	// not found either). It wraps store.ErrNotFound.
	ErrNotFound = fmt.Errorf("file %w", store.ErrNotFound)
	// ErrTooLarge: the stream is longer than the store's MaxBytes; nothing
	// was kept.
	ErrTooLarge = errors.New("file too large")
	// ErrEmpty: an upload without a byte.
	ErrEmpty = errors.New("the file is empty")
	// ErrUnsupportedPurpose: a purpose the gateway does not take uploads for.
	ErrUnsupportedPurpose = errors.New("unsupported purpose")
	// ErrInvalid: a missing or malformed field (filename, user).
	ErrInvalid = errors.New("invalid file")
	// ErrRead: reading the upload failed (the client, not the store).
	ErrRead = errors.New("read failed")
)

// File is a file's metadata: the Files API's file object.
type File struct {
	// ID is "file-" and 128 random bits in hex.
	ID     string
	UserID int64
	// TokenID is the key that uploaded it (0 for a batch's result file).
	TokenID   int64
	Purpose   string
	Filename  string
	Bytes     int64
	Status    string
	CreatedAt time.Time
	// ExpiresAt is when the sweep deletes it; zero for never.
	ExpiresAt time.Time

	blobKey string
}

// Ledger holds the files' records; *store.Store is one.
type Ledger interface {
	CreateFile(ctx context.Context, f store.File) error
	GetFile(ctx context.Context, userID int64, id string) (store.File, error)
	ListFiles(ctx context.Context, userID int64, f store.FileFilter) ([]store.File, error)
	DeleteFile(ctx context.Context, userID int64, id string) error
	SetFileExpiry(ctx context.Context, userID int64, id string, expiresAt time.Time) error
	ListExpiredFiles(ctx context.Context, now time.Time, limit int) ([]store.File, error)
}

// Options configure a Store; zero values take the defaults.
type Options struct {
	// MaxBytes is the largest file Create and WriteResult keep
	// (DefaultMaxBytes).
	MaxBytes int64
	// TTL is how long a file is kept when the upload names no expiry
	// (DefaultTTL).
	TTL time.Duration
	// Clock stamps created_at and expires_at (the real clock).
	Clock clock.PassiveClock
}

// Store keeps files: records in the ledger, bytes in the blob store.
type Store struct {
	ledger Ledger
	blobs  *blob.Store
	opts   Options
}

// New returns a Store on ledger and blobs.
func New(ledger Ledger, blobs *blob.Store, opts Options) *Store {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Store{ledger: ledger, blobs: blobs, opts: opts}
}

// MaxBytes is the size limit of one file.
func (s *Store) MaxBytes() int64 { return s.opts.MaxBytes }

// Upload names a file a tenant uploads.
type Upload struct {
	UserID   int64
	TokenID  int64
	Purpose  string
	Filename string
	// ExpiresAfter, when positive, replaces the store's TTL (OpenAI's
	// expires_after with anchor created_at).
	ExpiresAfter time.Duration
}

// Create streams r into the blob store as a new file of the tenant. Only
// purpose batch is taken (ErrUnsupportedPurpose otherwise). A stream over
// MaxBytes is ErrTooLarge and an empty one ErrEmpty; neither leaves a blob
// or a record behind.
func (s *Store) Create(ctx context.Context, u Upload, r io.Reader) (File, error) {
	if u.Purpose != PurposeBatch {
		return File{}, fmt.Errorf("%w %q: only %q files can be uploaded", ErrUnsupportedPurpose, u.Purpose, PurposeBatch)
	}
	f, err := s.write(ctx, u, r)
	if err != nil {
		return File{}, err
	}
	if f.Bytes == 0 {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), f.blobKey)
		return File{}, ErrEmpty
	}
	return s.record(ctx, f)
}

// WriteResult stores r as a file of the tenant userID with purpose (such as
// batch_output) and filename name: the batch controller's output and error
// files. It is subject to the same size limit and expiry as an upload;
// expiresAfter, when positive, replaces the store's TTL.
func (s *Store) WriteResult(ctx context.Context, userID int64, purpose, name string, expiresAfter time.Duration, r io.Reader) (File, error) {
	if purpose == "" {
		return File{}, fmt.Errorf("%w: a purpose is required", ErrInvalid)
	}
	f, err := s.write(ctx, Upload{UserID: userID, Purpose: purpose, Filename: name, ExpiresAfter: expiresAfter}, r)
	if err != nil {
		return File{}, err
	}
	return s.record(ctx, f)
}

// write streams r into a new blob and returns the file it makes, not yet
// recorded.
func (s *Store) write(ctx context.Context, u Upload, r io.Reader) (File, error) {
	switch {
	case u.UserID == 0:
		return File{}, fmt.Errorf("%w: no tenant", ErrInvalid)
	case u.Filename == "":
		return File{}, fmt.Errorf("%w: a filename is required", ErrInvalid)
	case len(u.Filename) > MaxFilenameLen:
		return File{}, fmt.Errorf("%w: the filename is longer than %d bytes", ErrInvalid, MaxFilenameLen)
	}
	id, err := newID()
	if err != nil {
		return File{}, err
	}
	now := s.opts.Clock.Now().Truncate(time.Second)
	ttl := s.opts.TTL
	if u.ExpiresAfter > 0 {
		ttl = u.ExpiresAfter
	}
	f := File{
		ID: id, UserID: u.UserID, TokenID: u.TokenID, Purpose: u.Purpose, Filename: u.Filename,
		Status: "processed", CreatedAt: now, ExpiresAt: now.Add(ttl),
		blobKey: fmt.Sprintf("files/%d/%s", u.UserID, id),
	}
	body := &blob.CapReader{R: r, Left: s.opts.MaxBytes}
	n, err := s.blobs.Put(ctx, f.blobKey, contentType, body)
	if err != nil {
		switch {
		case body.Over:
			return File{}, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, s.opts.MaxBytes)
		case body.ReadErr != nil:
			return File{}, fmt.Errorf("%w: %w", ErrRead, body.ReadErr)
		}
		return File{}, err
	}
	f.Bytes = n
	return f, nil
}

// record writes f's record; when that fails the blob goes too.
func (s *Store) record(ctx context.Context, f File) (File, error) {
	if err := s.ledger.CreateFile(ctx, toRecord(f)); err != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), f.blobKey)
		return File{}, err
	}
	return f, nil
}

// ExpireAfter makes f expire after its creation (OpenAI's expires_after,
// anchor created_at, given after the file in the upload) and returns it so.
func (s *Store) ExpireAfter(ctx context.Context, f File, after time.Duration) (File, error) {
	at := f.CreatedAt.Add(after)
	if err := s.ledger.SetFileExpiry(ctx, f.UserID, f.ID, at); err != nil {
		return File{}, err
	}
	f.ExpiresAt = at
	return f, nil
}

// Get returns the tenant's file id; ErrNotFound when it has none by that ID.
func (s *Store) Get(ctx context.Context, userID int64, id string) (File, error) {
	r, err := s.ledger.GetFile(ctx, userID, id)
	if errors.Is(err, store.ErrNotFound) {
		return File{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return File{}, err
	}
	return fromRecord(r), nil
}

// Open returns the tenant's file id and a reader of its bytes, which the
// caller closes.
func (s *Store) Open(ctx context.Context, userID int64, id string) (File, io.ReadCloser, error) {
	f, err := s.Get(ctx, userID, id)
	if err != nil {
		return File{}, nil, err
	}
	rd, err := s.blobs.Open(ctx, f.blobKey)
	if errors.Is(err, blob.ErrNotFound) {
		return File{}, nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return File{}, nil, fmt.Errorf("open file %s: %w", id, err)
	}
	return f, rd, nil
}

// ListOptions select a page of files: newest first unless Ascending.
type ListOptions struct {
	// After is the ID of the last file of the previous page.
	After string
	// Limit is the page size, 1 to MaxListLimit (0: MaxListLimit).
	Limit   int
	Purpose string
	// Ascending lists oldest first (OpenAI's order=asc).
	Ascending bool
}

// List returns a page of the tenant's files and whether more follow. An
// After that is not one of the tenant's files is ErrNotFound.
func (s *Store) List(ctx context.Context, userID int64, o ListOptions) ([]File, bool, error) {
	limit := o.Limit
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	rs, err := s.ledger.ListFiles(ctx, userID, store.FileFilter{Purpose: o.Purpose, After: o.After, Limit: limit, Ascending: o.Ascending})
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, fmt.Errorf("%w: %s", ErrNotFound, o.After)
	}
	if err != nil {
		return nil, false, err
	}
	more := len(rs) > limit
	if more {
		rs = rs[:limit]
	}
	out := make([]File, len(rs))
	for i, r := range rs {
		out[i] = fromRecord(r)
	}
	return out, more, nil
}

// Delete removes the tenant's file: the record first, so the file is gone
// for the API at once, then the blob (a blob left by a failure is
// unreachable).
func (s *Store) Delete(ctx context.Context, userID int64, id string) error {
	f, err := s.Get(ctx, userID, id)
	if err != nil {
		return err
	}
	if err := s.ledger.DeleteFile(ctx, userID, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return err
	}
	return s.blobs.Delete(ctx, f.blobKey)
}

// Sweep deletes every file expired at the clock's now, at most batch per
// query, and returns how many went.
func (s *Store) Sweep(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		batch = 500
	}
	now := s.opts.Clock.Now()
	deleted := 0
	var errs []error
	for {
		list, err := s.ledger.ListExpiredFiles(ctx, now, batch)
		if err != nil {
			return deleted, err
		}
		progress := false
		for _, r := range list {
			// The blob first: a crash in between leaves a record the next
			// sweep retries, never an orphan blob.
			if err := s.blobs.Delete(ctx, r.BlobKey); err != nil {
				errs = append(errs, fmt.Errorf("file %s: %w", r.ID, err))
				continue
			}
			if err := s.ledger.DeleteFile(ctx, r.UserID, r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, err)
				continue
			}
			deleted++
			progress = true
		}
		if len(list) < batch || !progress {
			return deleted, errors.Join(errs...)
		}
	}
}

// newID is "file-" and 128 random bits in hex.
func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("file id: %w", err)
	}
	return "file-" + hex.EncodeToString(b), nil
}

func toRecord(f File) store.File {
	return store.File{
		ID: f.ID, UserID: f.UserID, TokenID: f.TokenID, Purpose: f.Purpose, Filename: f.Filename,
		Bytes: f.Bytes, BlobKey: f.blobKey, Status: f.Status, CreatedAt: f.CreatedAt, ExpiresAt: f.ExpiresAt,
	}
}

func fromRecord(r store.File) File {
	return File{
		ID: r.ID, UserID: r.UserID, TokenID: r.TokenID, Purpose: r.Purpose, Filename: r.Filename,
		Bytes: r.Bytes, Status: r.Status, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, blobKey: r.BlobKey,
	}
}
