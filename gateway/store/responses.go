package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SaveResponse keeps the conversation state of a responses-protocol answer
// so a later request can continue it with previous_response_id. Saving the
// same ID again replaces the state.
func (s *Store) SaveResponse(ctx context.Context, id string, userID int64, model string, state []byte) error {
	_, err := s.db.ExecContext(ctx, s.q(`
		INSERT INTO responses (id, user_id, model, state, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, model = excluded.model`),
		id, userID, model, string(state), s.now())
	if err != nil {
		return fmt.Errorf("save response %s: %w", id, err)
	}
	return nil
}

// LoadResponse returns the state saved for a response of the user;
// ErrNotFound for an unknown ID or another user's response.
func (s *Store) LoadResponse(ctx context.Context, id string, userID int64) ([]byte, error) {
	var state string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT state FROM responses WHERE id = ? AND user_id = ?`), id, userID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("response %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load response %s: %w", id, err)
	}
	return []byte(state), nil
}

// DeleteResponse removes a stored response of the user; ErrNotFound for an
// unknown ID or another user's response.
func (s *Store) DeleteResponse(ctx context.Context, id string, userID int64) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM responses WHERE id = ? AND user_id = ?`), id, userID)
	if err != nil {
		return fmt.Errorf("delete response %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete response %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("response %s: %w", id, ErrNotFound)
	}
	return nil
}
