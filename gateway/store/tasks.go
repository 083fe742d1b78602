package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TaskRecord is the ledger's archive row of an image or video generation
// task (table tasks). The GenerationTask object is live work and is deleted
// after its retention; this row keeps answering task queries afterwards.
type TaskRecord struct {
	TaskID           string
	UserID           int64
	TokenID          int64
	RequestID        string
	Kind             string // image or video
	Model            string
	Status           string // the contract's task status
	BillingStatus    string // pending, settled, refunded or ""
	Quota            int64  // the confirmed charge (settled) or 0
	ClientBusinessID string
	// Body is the archived task as JSON (the caller's encoding; the handlers
	// and the GenerationTask controller share one in gateway/http/handlers).
	Body        []byte
	CreatedAt   int64 // Unix seconds
	CompletedAt int64 // Unix seconds of the final state; 0 while in flight
}

// UpsertTask writes the archive row of a task: inserted the first time,
// then overwritten with the newer state. Identity columns (user, token,
// request, kind, model, created_at) never change after the insert.
func (s *Store) UpsertTask(ctx context.Context, t TaskRecord) error {
	var completed any
	if t.CompletedAt != 0 {
		completed = t.CompletedAt
	}
	var body any
	if len(t.Body) > 0 {
		body = string(t.Body)
	}
	_, err := s.db.ExecContext(ctx, s.q(`
		INSERT INTO tasks (task_id, user_id, token_id, request_id, kind, model, status, billing_status, quota,
			client_business_id, body, created_at, completed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, billing_status = excluded.billing_status,
			quota = excluded.quota, body = excluded.body, completed_at = excluded.completed_at`),
		t.TaskID, t.UserID, t.TokenID, t.RequestID, t.Kind, t.Model, t.Status, t.BillingStatus, t.Quota,
		t.ClientBusinessID, body, t.CreatedAt, completed)
	if err != nil {
		return fmt.Errorf("archive task %s: %w", t.TaskID, err)
	}
	return nil
}

// InsertTask writes the archive row of a new task unless one exists; it
// never overwrites a newer state. It returns whether the row was inserted.
func (s *Store) InsertTask(ctx context.Context, t TaskRecord) (bool, error) {
	var body any
	if len(t.Body) > 0 {
		body = string(t.Body)
	}
	res, err := s.db.ExecContext(ctx, s.q(`
		INSERT INTO tasks (task_id, user_id, token_id, request_id, kind, model, status, billing_status, quota,
			client_business_id, body, created_at, completed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
		ON CONFLICT (task_id) DO NOTHING`),
		t.TaskID, t.UserID, t.TokenID, t.RequestID, t.Kind, t.Model, t.Status, t.BillingStatus, t.Quota,
		t.ClientBusinessID, body, t.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("archive new task %s: %w", t.TaskID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

const taskCols = `task_id, user_id, token_id, request_id, kind, model, status, billing_status, quota,
	client_business_id, body, created_at, completed_at`

// TaskByID returns the archive row of taskID owned by userID, or ErrNotFound.
// Another user's task is reported as not found.
func (s *Store) TaskByID(ctx context.Context, userID int64, taskID string) (*TaskRecord, error) {
	return s.oneTask(ctx, `SELECT `+taskCols+` FROM tasks WHERE task_id = ? AND user_id = ?`, taskID, userID)
}

// TaskByClientBusinessID returns the newest archive row of kind with the
// caller's business identifier, or ErrNotFound.
func (s *Store) TaskByClientBusinessID(ctx context.Context, userID int64, kind, clientBusinessID string) (*TaskRecord, error) {
	if clientBusinessID == "" {
		return nil, fmt.Errorf("task: %w", ErrNotFound)
	}
	return s.oneTask(ctx, `SELECT `+taskCols+` FROM tasks
		WHERE user_id = ? AND kind = ? AND client_business_id = ? ORDER BY created_at DESC LIMIT 1`,
		userID, kind, clientBusinessID)
}

func (s *Store) oneTask(ctx context.Context, query string, args ...any) (*TaskRecord, error) {
	var (
		t         TaskRecord
		body      sql.NullString
		completed sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, s.q(query), args...).Scan(&t.TaskID, &t.UserID, &t.TokenID, &t.RequestID,
		&t.Kind, &t.Model, &t.Status, &t.BillingStatus, &t.Quota, &t.ClientBusinessID, &body, &t.CreatedAt, &completed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read task: %w", err)
	}
	if body.Valid {
		t.Body = []byte(body.String)
	}
	t.CompletedAt = completed.Int64
	return &t, nil
}
