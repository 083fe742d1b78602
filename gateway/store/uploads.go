package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Upload is the ledger record of an uploaded file (POST /v1/uploads/*). It
// belongs to the tenant UserID; the object lives in the blob store under
// BlobKey until ExpiresAt, when the cleanup job deletes both.
type Upload struct {
	// ID is the public, unguessable upload ID ("upl_…").
	ID      string
	UserID  int64
	TokenID int64
	// BlobKey is the object's key in the blob store.
	BlobKey string
	// URL is the signed URL returned when the file was uploaded.
	URL      string
	MimeType string
	Size     int64
	Purpose  string
	// CreatedAt and ExpiresAt are stored with second precision.
	CreatedAt time.Time
	ExpiresAt time.Time
}

const uploadColumns = `id, user_id, token_id, blob_key, url, mime_type, size, purpose, created_at, expires_at`

// CreateUpload records an upload. An ID that exists already is ErrConflict.
func (s *Store) CreateUpload(ctx context.Context, u Upload) error {
	if u.ID == "" || u.UserID == 0 || u.BlobKey == "" {
		return fmt.Errorf("create upload: id, user and blob key are required")
	}
	if u.Purpose == "" {
		u.Purpose = "generation"
	}
	res, err := s.db.ExecContext(ctx, s.q(`
		INSERT INTO uploads (`+uploadColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`),
		u.ID, u.UserID, u.TokenID, u.BlobKey, u.URL, u.MimeType, u.Size, u.Purpose,
		u.CreatedAt.Unix(), u.ExpiresAt.Unix())
	if err != nil {
		return fmt.Errorf("create upload %s: %w", u.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("create upload %s: %w", u.ID, ErrConflict)
	}
	return nil
}

// GetUpload returns the upload id of the tenant userID. Another tenant's
// upload is ErrNotFound, exactly like a missing one.
func (s *Store) GetUpload(ctx context.Context, userID int64, id string) (Upload, error) {
	row := s.rdb.QueryRowContext(ctx, s.q(`SELECT `+uploadColumns+` FROM uploads WHERE id = ? AND user_id = ?`), id, userID)
	u, err := scanUpload(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Upload{}, fmt.Errorf("upload %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("get upload %s: %w", id, err)
	}
	return u, nil
}

// ListExpiredUploads returns at most limit uploads of any tenant whose
// expiry is at or before now, the oldest expiry first. Records without an
// expiry (written before expiry existed) are never listed.
func (s *Store) ListExpiredUploads(ctx context.Context, now time.Time, limit int) ([]Upload, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(`
		SELECT `+uploadColumns+` FROM uploads
		WHERE expires_at > 0 AND expires_at <= ?
		ORDER BY expires_at, id LIMIT ?`), now.Unix(), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", err)
	}
	defer rows.Close()
	var out []Upload
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, fmt.Errorf("list expired uploads: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", err)
	}
	return out, nil
}

// DeleteUpload removes the record of the tenant's upload. Deleting a record
// that is gone already is not an error, so concurrent cleaners may race.
func (s *Store) DeleteUpload(ctx context.Context, userID int64, id string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM uploads WHERE id = ? AND user_id = ?`), id, userID); err != nil {
		return fmt.Errorf("delete upload %s: %w", id, err)
	}
	return nil
}

// ExtendUpload moves an upload's expiry to until (the sweeper keeps an
// upload a live task still references).
func (s *Store) ExtendUpload(ctx context.Context, userID int64, id string, until time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE uploads SET expires_at = ? WHERE id = ? AND user_id = ?`),
		until.Unix(), id, userID); err != nil {
		return fmt.Errorf("extend upload %s: %w", id, err)
	}
	return nil
}

type uploadRowScanner interface{ Scan(dest ...any) error }

func scanUpload(r uploadRowScanner) (Upload, error) {
	var u Upload
	var created, expires int64
	if err := r.Scan(&u.ID, &u.UserID, &u.TokenID, &u.BlobKey, &u.URL, &u.MimeType, &u.Size, &u.Purpose, &created, &expires); err != nil {
		return Upload{}, err
	}
	u.CreatedAt, u.ExpiresAt = time.Unix(created, 0), time.Unix(expires, 0)
	return u, nil
}
