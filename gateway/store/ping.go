package store

import "context"

// Ping reports whether the ledger database answers (gateway readiness).
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }
