package usagelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/gateway/store"
)

// Inserter is the ledger side of the writer; *store.Store implements it.
// InsertUsage must skip rows whose request ID is already stored, which is
// what makes replays safe.
type Inserter interface {
	InsertUsage(ctx context.Context, rows []store.UsageRow) (int, error)
}

// Config configures a Writer. Zero fields take the defaults.
type Config struct {
	// SpoolPath is the append-only file used while the database is down.
	// Required; put it on a persistent volume so a restart replays it.
	SpoolPath string
	// QueueSize bounds the rows waiting in memory (default 10000). A full
	// queue blocks Write: back-pressure, never a dropped row.
	QueueSize int
	// BatchSize is the most rows per insert (default 1000).
	BatchSize int
	// FlushInterval flushes a partial batch this long after its first row at
	// the latest (default 200ms).
	FlushInterval time.Duration
	// RetryInterval is how often the spool is replayed while the database is
	// down (default 1s).
	RetryInterval time.Duration
	// InsertTimeout bounds one insert (default 10s).
	InsertTimeout time.Duration
	Logger        *slog.Logger
}

func (c *Config) defaults() {
	if c.QueueSize <= 0 {
		c.QueueSize = 10000
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 200 * time.Millisecond
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.InsertTimeout <= 0 {
		c.InsertTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("usage writer closed")
	// ErrSpooled is returned by Close when rows are still in the spool file
	// because the database was unreachable; they are replayed on next start.
	ErrSpooled = errors.New("usage rows left in spool")
)

// Writer queues usage rows and writes them in batches. Write is safe for
// concurrent use; one goroutine does all database and spool I/O.
type Writer struct {
	ins   Inserter
	cfg   Config
	queue chan store.UsageRow
	flush chan chan struct{}
	done  chan struct{}

	mu     sync.RWMutex // Write holds it shared; Close exclusive, to close queue safely
	closed bool

	spool      *spool
	spoolRows  atomic.Int64
	spoolBytes atomic.Int64
	written    atomic.Int64
}

// New opens the spool (replaying any rows a previous run left there as soon
// as the database answers) and starts the writer.
func New(ins Inserter, cfg Config) (*Writer, error) {
	if cfg.SpoolPath == "" {
		return nil, errors.New("usagelog: SpoolPath is required")
	}
	cfg.defaults()
	sp, err := openSpool(cfg.SpoolPath)
	if err != nil {
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	w := &Writer{
		ins:   ins,
		cfg:   cfg,
		queue: make(chan store.UsageRow, cfg.QueueSize),
		flush: make(chan chan struct{}),
		done:  make(chan struct{}),
		spool: sp,
	}
	w.publishSpool()
	go w.run()
	return w, nil
}

// Write queues a row. It blocks while the queue is full and returns ctx's
// error if ctx ends first; the row is then not queued.
func (w *Writer) Write(ctx context.Context, row store.UsageRow) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- row:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush writes everything queued so far (to the database, or the spool if it
// is down) and tries a replay of the spool.
func (w *Writer) Flush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case w.flush <- ack:
	case <-w.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting rows, writes every queued row and replays the spool
// once more. It returns ErrSpooled when rows remain in the spool file (safe on
// disk, replayed by the next Writer on the same path).
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("usagelog: close: %w", ctx.Err())
	}
	if n := w.spoolRows.Load(); n > 0 {
		return fmt.Errorf("usagelog: %w: %d rows in %s", ErrSpooled, n, w.cfg.SpoolPath)
	}
	return nil
}

// QueueDepth is the number of rows waiting in memory.
func (w *Writer) QueueDepth() int { return len(w.queue) }

// SpoolRows is the number of rows in the spool file.
func (w *Writer) SpoolRows() int64 { return w.spoolRows.Load() }

// SpoolBytes is the size of the spool file.
func (w *Writer) SpoolBytes() int64 { return w.spoolBytes.Load() }

// Written is the number of rows newly inserted into the database.
func (w *Writer) Written() int64 { return w.written.Load() }

func (w *Writer) run() {
	defer close(w.done)
	defer func() {
		if err := w.spool.close(); err != nil {
			w.cfg.Logger.Error("usage spool close", "err", err)
		}
	}()
	w.replay()
	tick := time.NewTicker(w.cfg.FlushInterval)
	defer tick.Stop()
	retry := time.NewTicker(w.cfg.RetryInterval)
	defer retry.Stop()
	batch := make([]store.UsageRow, 0, w.cfg.BatchSize)
	for {
		select {
		case row, ok := <-w.queue:
			if !ok {
				w.write(batch)
				w.replay()
				return
			}
			batch = append(batch, row)
			if len(batch) >= w.cfg.BatchSize {
				w.write(batch)
				batch = batch[:0]
			}
		case <-tick.C:
			w.write(batch)
			batch = batch[:0]
		case <-retry.C:
			w.replay()
		case ack := <-w.flush:
			batch = w.drain(batch)
			w.write(batch)
			batch = batch[:0]
			w.replay()
			close(ack)
		}
	}
}

// drain moves the rows already queued into batch, writing full batches.
func (w *Writer) drain(batch []store.UsageRow) []store.UsageRow {
	for {
		select {
		case row, ok := <-w.queue:
			if !ok {
				return batch
			}
			batch = append(batch, row)
			if len(batch) >= w.cfg.BatchSize {
				w.write(batch)
				batch = batch[:0]
			}
		default:
			return batch
		}
	}
}

// write stores a batch in the database, or in the spool when the database
// fails or rows are already spooled (the database was down moments ago; the
// retry ticker decides when to try it again, so a dead database costs one
// failed insert per RetryInterval, not one per batch). It does not return
// until the batch is in one of the two: if both fail (disk full and database
// down) it retries, and Write blocks behind it.
func (w *Writer) write(batch []store.UsageRow) {
	if len(batch) == 0 {
		return
	}
	for attempt := 0; ; attempt++ {
		if w.spool.rows == 0 {
			err := w.insert(batch)
			if err == nil {
				return
			}
			w.cfg.Logger.Warn("usage insert failed; spooling", "rows", len(batch), "err", err)
		}
		err := w.spool.append(batch)
		w.publishSpool()
		if err == nil {
			return
		}
		w.cfg.Logger.Error("usage spool append failed; retrying", "rows", len(batch), "attempt", attempt, "err", err)
		time.Sleep(w.cfg.RetryInterval)
	}
}

func (w *Writer) insert(rows []store.UsageRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.InsertTimeout)
	defer cancel()
	n, err := w.ins.InsertUsage(ctx, rows)
	if err != nil {
		return err
	}
	w.written.Add(int64(n))
	return nil
}

// replay inserts the spooled rows in batches and empties the spool when all
// are in. A failed replay keeps the file; rows of it that were inserted
// before the failure are skipped next time by their unique request ID.
func (w *Writer) replay() {
	if w.spool.rows == 0 {
		return
	}
	var batch []store.UsageRow
	var failed error
	err := w.spool.scan(func(row store.UsageRow) {
		if failed != nil {
			return
		}
		batch = append(batch, row)
		if len(batch) >= w.cfg.BatchSize {
			failed = w.insert(batch)
			batch = batch[:0]
		}
	})
	if err == nil && failed == nil && len(batch) > 0 {
		failed = w.insert(batch)
	}
	switch {
	case err != nil:
		w.cfg.Logger.Error("usage spool unreadable", "path", w.cfg.SpoolPath, "err", err)
	case failed != nil:
		w.cfg.Logger.Warn("usage spool replay failed; will retry", "rows", w.spool.rows, "err", failed)
	default:
		if err := w.spool.reset(); err != nil {
			w.cfg.Logger.Error("usage spool reset", "err", err)
		}
	}
	w.publishSpool()
}

func (w *Writer) publishSpool() {
	w.spoolRows.Store(w.spool.rows)
	w.spoolBytes.Store(w.spool.bytes)
}
