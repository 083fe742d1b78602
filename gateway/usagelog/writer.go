package usagelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
// concurrent use. One goroutine batches rows into the database or the spool;
// spool replays run in a second goroutine so that a slow or hanging database
// never stalls the queue for longer than one insert.
type Writer struct {
	ins   Inserter
	cfg   Config
	queue chan store.UsageRow
	flush chan chan struct{}
	done  chan struct{}

	mu     sync.RWMutex // Write holds it shared; Close exclusive, to close queue safely
	closed bool

	// Owned by the batching goroutine.
	active     *segment
	replaying  bool
	replayDone chan error

	activeRows, activeBytes   atomic.Int64 // in the active spool file
	pendingRows, pendingBytes atomic.Int64 // in replay segments
	written                   atomic.Int64
}

// New opens the spool (replaying any rows a previous run left there as soon
// as the database answers) and starts the writer.
func New(ins Inserter, cfg Config) (*Writer, error) {
	if cfg.SpoolPath == "" {
		return nil, errors.New("usagelog: SpoolPath is required")
	}
	cfg.defaults()
	active, err := openSegment(cfg.SpoolPath)
	if err != nil {
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	segs, err := replaySegments(cfg.SpoolPath)
	if err != nil {
		_ = active.close()
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	rows, size, err := countSegments(segs)
	if err != nil {
		_ = active.close()
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	return start(ins, cfg, active, rows, size), nil
}

func start(ins Inserter, cfg Config, active *segment, pendingRows, pendingBytes int64) *Writer {
	w := &Writer{
		ins:        ins,
		cfg:        cfg,
		queue:      make(chan store.UsageRow, cfg.QueueSize),
		flush:      make(chan chan struct{}),
		done:       make(chan struct{}),
		active:     active,
		replayDone: make(chan error, 1),
	}
	w.pendingRows.Store(pendingRows)
	w.pendingBytes.Store(pendingBytes)
	w.publishActive()
	go w.run()
	return w
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
// is down) and waits for one replay of the spool.
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
// once more. It returns ErrSpooled when rows remain in the spool (safe on
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
	if n := w.SpoolRows(); n > 0 {
		return fmt.Errorf("usagelog: %w: %d rows in %s*", ErrSpooled, n, w.cfg.SpoolPath)
	}
	return nil
}

// QueueDepth is the number of rows waiting in memory.
func (w *Writer) QueueDepth() int { return len(w.queue) }

// SpoolRows is the number of rows in the spool files.
func (w *Writer) SpoolRows() int64 { return w.activeRows.Load() + w.pendingRows.Load() }

// SpoolBytes is the size of the spool files.
func (w *Writer) SpoolBytes() int64 { return w.activeBytes.Load() + w.pendingBytes.Load() }

// Written is the number of rows newly inserted into the database.
func (w *Writer) Written() int64 { return w.written.Load() }

func (w *Writer) run() {
	defer close(w.done)
	w.startReplay()
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
				w.finish()
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
			w.startReplay()
		case err := <-w.replayDone:
			w.replayEnded(err)
		case ack := <-w.flush:
			batch = w.drain(batch)
			w.write(batch)
			batch = batch[:0]
			w.waitReplay()
			w.startReplay()
			w.waitReplay()
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

// finish runs at Close: wait for a replay in flight, then replay once more.
func (w *Writer) finish() {
	w.waitReplay()
	w.startReplay()
	w.waitReplay()
	if err := w.active.close(); err != nil {
		w.cfg.Logger.Error("usage spool close", "err", err)
	}
}

// spooling reports whether rows are in the spool: the database failed
// recently, so new batches go to the spool too until a replay empties it.
// The retry ticker decides when to try the database again, so a dead
// database costs one failed insert per RetryInterval, not one per batch.
func (w *Writer) spooling() bool {
	return w.active.rows > 0 || w.replaying || w.pendingRows.Load() > 0
}

// write stores a batch in the database or the spool. It does not return
// until the batch is in one of the two: if both fail (database down and disk
// full) it retries, and Write blocks behind it (back-pressure, no loss).
func (w *Writer) write(batch []store.UsageRow) {
	if len(batch) == 0 {
		return
	}
	for attempt := 0; ; attempt++ {
		if !w.spooling() {
			err := w.insert(batch)
			if err == nil {
				return
			}
			w.cfg.Logger.Warn("usage insert failed; spooling", "rows", len(batch), "err", err)
		}
		err := w.active.append(batch)
		w.publishActive()
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

// startReplay rotates the active spool file into a replay segment and
// replays all segments in the background, unless a replay is running.
func (w *Writer) startReplay() {
	if w.replaying {
		return
	}
	if w.active.rows > 0 {
		rows, size := w.active.rows, w.active.bytes
		if _, err := w.active.rotate(); err != nil {
			w.cfg.Logger.Error("usage spool rotate", "err", err)
			return
		}
		w.pendingRows.Add(rows)
		w.pendingBytes.Add(size)
		w.publishActive()
	}
	segs, err := replaySegments(w.cfg.SpoolPath)
	if err != nil {
		w.cfg.Logger.Error("usage spool", "err", err)
		return
	}
	if len(segs) == 0 {
		return
	}
	w.replaying = true
	go func() { w.replayDone <- w.replay(segs) }()
}

func (w *Writer) waitReplay() {
	if w.replaying {
		w.replayEnded(<-w.replayDone)
	}
}

func (w *Writer) replayEnded(err error) {
	w.replaying = false
	if err != nil {
		w.cfg.Logger.Warn("usage spool replay failed; will retry", "rows", w.SpoolRows(), "err", err)
	}
}

// replay inserts the rows of each segment in batches and deletes the
// segment when all of its rows are in. Rows of a segment that were inserted
// before a failure are skipped next time by their unique request ID. It runs
// in its own goroutine and touches only the segment files.
func (w *Writer) replay(segs []string) error {
	for _, seg := range segs {
		batch := make([]store.UsageRow, 0, w.cfg.BatchSize)
		rows, size, err := scanFile(seg, func(r store.UsageRow) error {
			batch = append(batch, r)
			if len(batch) < w.cfg.BatchSize {
				return nil
			}
			err := w.insert(batch)
			batch = batch[:0]
			return err
		})
		if err == nil && len(batch) > 0 {
			err = w.insert(batch)
		}
		if err != nil {
			return err
		}
		if err := os.Remove(seg); err != nil {
			return fmt.Errorf("remove replayed spool segment: %w", err)
		}
		w.pendingRows.Add(-rows)
		w.pendingBytes.Add(-size)
	}
	return nil
}

func (w *Writer) publishActive() {
	w.activeRows.Store(w.active.rows)
	w.activeBytes.Store(w.active.bytes)
}
