package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// chunkSizes are the row counts of the usage writer's multi-row statements.
// A batch runs as a few statements of these sizes (400 rows: six of 64 and
// one of 16), and each size of each statement is parsed by the database
// once, not once per batch: with SQLite, parsing a fresh statement of a few
// thousand parameters per batch cost about as much as executing it.
var chunkSizes = [...]int{64, 16, 4, 1}

// eachChunk calls fn with consecutive ranges [lo, hi) covering n items,
// each of a length in chunkSizes, largest first.
func eachChunk(n int, fn func(lo, hi int) error) error {
	lo := 0
	for _, size := range chunkSizes {
		for n-lo >= size {
			if err := fn(lo, lo+size); err != nil {
				return err
			}
			lo += size
		}
	}
	return nil
}

// stmtCache holds the prepared statements of the usage writer, by query
// text. They are prepared on the write pool outside any transaction (the
// SQLite write pool has one connection, which a transaction holds) and used
// inside transactions through Tx.StmtContext.
type stmtCache struct {
	prep    sync.Mutex // serialises preparers; never held by a transaction
	stmts   atomic.Pointer[map[string]*sql.Stmt]
	closed  bool
	queries func() []string
}

// prepare makes sure every statement is prepared. On failure (the database
// is down) it returns the error and the queries run unprepared meanwhile.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB) error {
	if c.stmts.Load() != nil {
		return nil
	}
	c.prep.Lock()
	defer c.prep.Unlock()
	if c.stmts.Load() != nil || c.closed {
		return nil
	}
	m := map[string]*sql.Stmt{}
	for _, q := range c.queries() {
		if _, ok := m[q]; ok {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range m {
				_ = st.Close()
			}
			return err
		}
		m[q] = st
	}
	c.stmts.Store(&m)
	return nil
}

// close closes the prepared statements.
func (c *stmtCache) close() error {
	c.prep.Lock()
	defer c.prep.Unlock()
	c.closed = true
	m := c.stmts.Swap(nil)
	if m == nil {
		return nil
	}
	var errs []error
	for _, st := range *m {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

func (c *stmtCache) get(query string) *sql.Stmt {
	if m := c.stmts.Load(); m != nil {
		return (*m)[query]
	}
	return nil
}

// txQuery runs query in tx, prepared when the cache has it.
func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.stmts.get(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// txExec runs query in tx, prepared when the cache has it.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.stmts.get(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}
