package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// File is the ledger record of a file of the Files API: an uploaded batch
// input or a batch's output or error file. It belongs to the tenant UserID;
// its bytes live in the blob store under BlobKey until ExpiresAt.
type File struct {
	// ID is the public, unguessable file ID ("file-…").
	ID      string
	UserID  int64
	TokenID int64
	// Purpose is the OpenAI purpose: batch (an input) or batch_output.
	Purpose  string
	Filename string
	Bytes    int64
	BlobKey  string
	// Status is OpenAI's (deprecated) file status; always processed.
	Status string
	// CreatedAt and ExpiresAt are stored with second precision; a zero
	// ExpiresAt never expires.
	CreatedAt time.Time
	ExpiresAt time.Time
}

// FileFilter selects a page of a tenant's files, newest first.
type FileFilter struct {
	// Purpose keeps only files of that purpose ("" for all).
	Purpose string
	// After is the ID of the last file of the previous page ("" for the
	// first page); a file that is not the tenant's is ErrNotFound.
	After string
	// Limit is the page size (at least 1).
	Limit int
	// Ascending lists oldest first.
	Ascending bool
}

const fileColumns = `id, user_id, token_id, purpose, filename, bytes, blob_key, status, created_at, expires_at`

// CreateFile records a file. An ID that exists already is ErrConflict.
func (s *Store) CreateFile(ctx context.Context, f File) error {
	if f.ID == "" || f.UserID == 0 || f.BlobKey == "" || f.Purpose == "" {
		return fmt.Errorf("create file: id, user, purpose and blob key are required")
	}
	if f.Status == "" {
		f.Status = "processed"
	}
	var expires int64
	if !f.ExpiresAt.IsZero() {
		expires = f.ExpiresAt.Unix()
	}
	res, err := s.db.ExecContext(ctx, s.q(`
		INSERT INTO files (`+fileColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`),
		f.ID, f.UserID, f.TokenID, f.Purpose, f.Filename, f.Bytes, f.BlobKey, f.Status,
		f.CreatedAt.Unix(), expires)
	if err != nil {
		return fmt.Errorf("create file %s: %w", f.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("create file %s: %w", f.ID, ErrConflict)
	}
	return nil
}

// GetFile returns the file id of the tenant userID. Another tenant's file
// is ErrNotFound, exactly like a missing one.
func (s *Store) GetFile(ctx context.Context, userID int64, id string) (File, error) {
	row := s.rdb.QueryRowContext(ctx, s.q(`SELECT `+fileColumns+` FROM files WHERE id = ? AND user_id = ?`), id, userID)
	f, err := scanFile(row)
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, fmt.Errorf("file %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return File{}, fmt.Errorf("get file %s: %w", id, err)
	}
	return f, nil
}

// ListFiles returns up to f.Limit+1 files of the tenant after f.After, so
// the caller learns whether there is a further page without a second query.
func (s *Store) ListFiles(ctx context.Context, userID int64, f FileFilter) ([]File, error) {
	if f.Limit < 1 {
		return nil, fmt.Errorf("list files: %w: limit must be at least 1", ErrInvalidQuery)
	}
	cmp, order := "<", "DESC"
	if f.Ascending {
		cmp, order = ">", "ASC"
	}
	where := `user_id = ?`
	args := []any{userID}
	if f.Purpose != "" {
		where += ` AND purpose = ?`
		args = append(args, f.Purpose)
	}
	if f.After != "" {
		after, err := s.GetFile(ctx, userID, f.After)
		if err != nil {
			return nil, err
		}
		where += ` AND (created_at ` + cmp + ` ? OR (created_at = ? AND id ` + cmp + ` ?))`
		args = append(args, after.CreatedAt.Unix(), after.CreatedAt.Unix(), after.ID)
	}
	args = append(args, f.Limit+1)
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT `+fileColumns+` FROM files WHERE `+where+
		` ORDER BY created_at `+order+`, id `+order+` LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return collectFiles(rows)
}

// ListExpiredFiles returns at most limit files of any tenant whose expiry
// is at or before now, the oldest expiry first.
func (s *Store) ListExpiredFiles(ctx context.Context, now time.Time, limit int) ([]File, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(`
		SELECT `+fileColumns+` FROM files
		WHERE expires_at > 0 AND expires_at <= ?
		ORDER BY expires_at, id LIMIT ?`), now.Unix(), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired files: %w", err)
	}
	return collectFiles(rows)
}

// SetFileExpiry moves the tenant's file's expiry to expiresAt; a file that
// is not there (or another tenant's) is ErrNotFound.
func (s *Store) SetFileExpiry(ctx context.Context, userID int64, id string, expiresAt time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE files SET expires_at = ? WHERE id = ? AND user_id = ?`), expiresAt.Unix(), id, userID)
	if err != nil {
		return fmt.Errorf("set expiry of file %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("file %s: %w", id, ErrNotFound)
	}
	return nil
}

// DeleteFile removes the record of the tenant's file; a file that is not
// there (gone already, or another tenant's) is ErrNotFound.
func (s *Store) DeleteFile(ctx context.Context, userID int64, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM files WHERE id = ? AND user_id = ?`), id, userID)
	if err != nil {
		return fmt.Errorf("delete file %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("file %s: %w", id, ErrNotFound)
	}
	return nil
}

func collectFiles(rows *sql.Rows) ([]File, error) {
	defer rows.Close()
	var out []File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

func scanFile(r uploadRowScanner) (File, error) {
	var f File
	var created, expires int64
	if err := r.Scan(&f.ID, &f.UserID, &f.TokenID, &f.Purpose, &f.Filename, &f.Bytes, &f.BlobKey, &f.Status, &created, &expires); err != nil {
		return File{}, err
	}
	f.CreatedAt = time.Unix(created, 0)
	if expires > 0 {
		f.ExpiresAt = time.Unix(expires, 0)
	}
	return f, nil
}
