package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrations embed.FS

// Clock tells the ledger the time. k8s.io/utils/clock.Clock satisfies it; tests
// inject a fake one to roll daily and monthly windows and expire leases.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

type dialect int

const (
	postgres dialect = iota
	sqlite
)

func (d dialect) String() string {
	if d == postgres {
		return "postgres"
	}
	return "sqlite"
}

// Store is the ledger. It is safe for concurrent use; every method that
// changes money runs in one transaction.
type Store struct {
	dialect dialect
	// db takes every write. On SQLite it is limited to one connection whose
	// transactions begin IMMEDIATE, so writers queue in database/sql's pool
	// instead of failing with SQLITE_BUSY.
	db *sql.DB
	// rdb serves reads. On SQLite it is a separate pool (WAL lets readers run
	// beside the writer); on PostgreSQL it is db.
	rdb *sql.DB

	clock        Clock
	queryTimeout time.Duration
	cursorKey    []byte
	stmts        stmtCache // the usage writer's prepared statements
	// retentionBatch is the most rows one retention DELETE removes.
	retentionBatch int
}

// Option configures Open.
type Option func(*Store)

// WithClock replaces the wall clock (tests roll windows and expire leases).
func WithClock(c Clock) Option { return func(s *Store) { s.clock = c } }

// WithQueryTimeout bounds the usage queries (ListUsage, SummarizeUsage); a
// query that runs longer fails with ErrQueryTimeout. Default 5 s.
func WithQueryTimeout(d time.Duration) Option { return func(s *Store) { s.queryTimeout = d } }

// Open connects to the ledger named by dsn, applies pending migrations and
// returns the Store. Accepted DSNs:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	sqlite:///var/lib/modelgate/ledger.db               (sqlite:// + path)
//	sqlite://relative/ledger.db
//	sqlite://:memory:                                   (one connection; tests)
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	s := &Store{clock: realClock{}, queryTimeout: 5 * time.Second, retentionBatch: defaultRetentionBatch}
	s.stmts.queries = s.usageQueries
	for _, o := range opts {
		o(s)
	}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		err = s.openPostgres(dsn)
	case strings.HasPrefix(dsn, "sqlite://"):
		err = s.openSQLite(strings.TrimPrefix(dsn, "sqlite://"))
	default:
		return nil, fmt.Errorf("store: unsupported DSN scheme in %q (want postgres://, postgresql:// or sqlite://)", redact(dsn))
	}
	if err != nil {
		return nil, err
	}
	if err := s.init(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: connect to %s: %w", s.dialect, err)
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if err := s.EnsurePartitions(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return s.loadCursorKey(ctx)
}

func (s *Store) openPostgres(dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("store: open postgres: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s.dialect, s.db, s.rdb = postgres, db, db
	return nil
}

func (s *Store) openSQLite(path string) error {
	if path == "" {
		return errors.New("store: sqlite DSN needs a path, e.g. sqlite://ledger.db")
	}
	const pragmas = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"
	s.dialect = sqlite
	if path == ":memory:" {
		// Each connection to :memory: is its own database, so one connection
		// serves reads and writes.
		db, err := sql.Open("sqlite", "file::memory:?_txlock=immediate&"+pragmas+"&_pragma=synchronous(NORMAL)")
		if err != nil {
			return fmt.Errorf("store: open sqlite: %w", err)
		}
		db.SetMaxOpenConns(1)
		s.db, s.rdb = db, db
		return nil
	}
	file := "file:" + (&url.URL{Path: path}).EscapedPath()
	// The one writer connection keeps 64 MiB of pages in memory (default
	// 2 MiB): the usage writer touches token, lease and rollup rows all over
	// their tables. A checkpoint copies each page changed since the last
	// one once, so checkpointing every 8 000 WAL pages (default 1 000)
	// copies a page that many batches change once instead of for every
	// other batch. Statement journals (a multi-row statement's undo log)
	// stay in memory instead of a temporary file written page by page.
	//
	// The writer commits with synchronous=FULL (the WAL is fsynced at every
	// commit, as PostgreSQL does by default): the usage writer erases a
	// journal file once its rows are committed, so a commit that a power
	// loss could roll back (NORMAL syncs only at checkpoints) would lose
	// rows the journal had made durable. Readers never commit.
	const writer = "&_pragma=synchronous(FULL)&_pragma=cache_size(-65536)&_pragma=wal_autocheckpoint(8000)&_pragma=temp_store(2)"
	w, err := sql.Open("sqlite", file+"?_txlock=immediate&"+pragmas+writer)
	if err != nil {
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", file+"?_pragma=query_only(1)&"+pragmas+"&_pragma=synchronous(NORMAL)")
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	s.db, s.rdb = w, r
	return nil
}

// migrate applies the embedded migrations of the dialect with goose. On
// PostgreSQL a session advisory lock serialises replicas that start together.
func (s *Store) migrate(ctx context.Context) error {
	dir, gd := "migrations/sqlite", goose.DialectSQLite3
	var opts []goose.ProviderOption
	if s.dialect == postgres {
		dir, gd = "migrations/postgres", goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return fmt.Errorf("store: migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	p, err := goose.NewProvider(gd, s.db, sub, opts...)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: apply migrations: %w", err)
	}
	return nil
}

// loadCursorKey reads the key that signs usage cursors, creating it on first
// start. It lives in the database so every replica accepts every other
// replica's cursors.
func (s *Store) loadCursorKey(ctx context.Context) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("store: cursor key: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO ledger_meta (key, value) VALUES ('cursor_key', ?) ON CONFLICT (key) DO NOTHING`), hex.EncodeToString(b)); err != nil {
		return fmt.Errorf("store: store cursor key: %w", err)
	}
	var v string
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM ledger_meta WHERE key = 'cursor_key'`).Scan(&v); err != nil {
		return fmt.Errorf("store: read cursor key: %w", err)
	}
	key, err := hex.DecodeString(v)
	if err != nil {
		return fmt.Errorf("store: cursor key is not hex: %w", err)
	}
	s.cursorKey = key
	return nil
}

// Close closes the database handles.
func (s *Store) Close() error {
	errs := []error{s.stmts.close()}
	if s.rdb != nil && s.rdb != s.db {
		errs = append(errs, s.rdb.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// Dialect names the backend: "postgres" or "sqlite".
func (s *Store) Dialect() string { return s.dialect.String() }

// q rewrites the ? placeholders of a query to $n for PostgreSQL, so every
// query is written once for both dialects. Queries never contain a literal ?.
func (s *Store) q(query string) string {
	if s.dialect != postgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// forUpdate is the row-lock suffix of a SELECT inside a transaction. On
// PostgreSQL it is NO KEY UPDATE, which excludes every other writer of the row
// but not the KEY SHARE lock a foreign-key check takes (creating a token does
// not wait for its tenant's quota transactions). SQLite has no row locks; its
// IMMEDIATE transactions already hold the database's write lock.
func (s *Store) forUpdate() string {
	if s.dialect == postgres {
		return " FOR NO KEY UPDATE"
	}
	return ""
}

// inTx runs fn in a transaction on the write pool and commits when fn
// returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *Store) now() int64 { return s.clock.Now().Unix() }

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}
