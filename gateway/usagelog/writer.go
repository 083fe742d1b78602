package usagelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
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

// Durability is what a row must reach before it is acknowledged.
type Durability int

const (
	// DurableDisk (the default): the journal append is fdatasynced. An
	// acknowledged row survives a crash of the process and of the machine.
	DurableDisk Durability = iota
	// DurableProcess: the journal append is written (to the kernel's page
	// cache) but not synced. An acknowledged row survives a crash or SIGKILL
	// of the process, not a power loss or kernel crash before the kernel
	// writes it back (seconds). It saves one disk flush per group of
	// requests: on a disk where a flush takes milliseconds, that is most of
	// the latency durability adds (docs/billing.md, "Durable before done").
	DurableProcess
)

// ParseDurability reads the flag's values "disk" and "process".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "", "disk":
		return DurableDisk, nil
	case "process":
		return DurableProcess, nil
	}
	return 0, fmt.Errorf("usage durability %q: want disk or process", s)
}

// Config configures a Writer. Zero fields take the defaults.
type Config struct {
	// Durability of an acknowledged row; default DurableDisk.
	Durability Durability
	// SpoolPath names the journal every row is appended to before it is
	// acknowledged (the files <SpoolPath>.journal-<n>), and where rows wait
	// while the database is down. Required; put it on a persistent volume
	// so a restart replays it.
	SpoolPath string
	// QueueSize bounds the rows waiting for the next journal append
	// (default 10000). A full queue blocks Submit: back-pressure, never a
	// dropped row.
	QueueSize int
	// BatchSize is the most rows per insert (default 5000). The journal is
	// handed to the database when it holds this many rows.
	BatchSize int
	// GroupWindow is the least time between the starts of two journal
	// appends (default 500µs with DurableDisk, 150µs with DurableProcess,
	// where it applies only to rows Submit could not append itself).
	// A row that finds the journal idle for longer is appended at once;
	// under load rows gather for up to this long, so one fsync covers more
	// of them (an fsync costs ~100µs of CPU on a virtual disk). Negative: no
	// window.
	GroupWindow time.Duration
	// FlushInterval hands the journal to the database this long after the
	// previous hand-off at the latest (default 500ms): a larger batch
	// costs the database less per row (rows of a batch share the pages it
	// writes), and a row reaches the usage endpoints this much later at
	// most (docs/billing.md, "Ledger").
	FlushInterval time.Duration
	// RetryInterval is how often the database is tried again while it is
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
		c.BatchSize = 5000
	}
	if c.GroupWindow == 0 && c.Durability == DurableProcess {
		// No flush to share, but an append is a write and a wake-up of every
		// waiting handler: under load, rows that gather for 150 µs share
		// one append and cost the gateway less CPU each than an append
		// apiece. A lone client finds the journal idle and waits for
		// nothing.
		c.GroupWindow = 150 * time.Microsecond
	}
	if c.GroupWindow == 0 {
		c.GroupWindow = 500 * time.Microsecond
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 500 * time.Millisecond
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
	// ErrClosed is returned by Submit and Write after Close.
	ErrClosed = errors.New("usage writer closed")
	// ErrSpooled is returned by Close when rows are still in the spool file
	// because the database was unreachable; they are replayed on next start.
	ErrSpooled = errors.New("usage rows left in spool")
	// ErrNotDurable is the error of an Ack whose rows reached neither the
	// spool nor the database (disk failing and database down). The rows stay
	// in memory and the writer keeps retrying them.
	ErrNotDurable = errors.New("usage row not durable")
)

// maxUnsent bounds, in batches, the rows kept in memory for the database
// while it is slow; beyond it they are read back from the journal.
const maxUnsent = 10

// Writer makes usage rows durable by group commit to a journal, then writes
// them to the database in large batches.
//
// With DurableProcess, Submit appends the row itself and returns an Ack
// that is already done; rows it cannot append (the journal failing) take
// the path below.
//
// Submit adds a row to the next journal append. The journal goroutine
// starts an append as soon as a row arrives if none started in the last
// GroupWindow; rows that arrive while an append and its fsync run, or
// within the window, wait for the next one. An idle writer so adds one
// fsync to a row's latency, a busy one amortises an fsync over every row
// that came during the previous one and the window. After the fsync the rows are
// acknowledged (Ack): they survive a crash from then on.
//
// Every FlushInterval, or BatchSize rows, the active journal file is
// handed to the ledger goroutine and a free one becomes active (spool.go).
// The ledger goroutine inserts the file's rows (kept in memory, so the file
// is not read back) and erases the file for reuse. A failed insert leaves
// the file as it is and the writer stops handing off until the next
// RetryInterval, when every pending file is replayed in order.
// Acknowledgement never waits on the database, so a slow or hanging
// database costs latency to no request.
type Writer struct {
	ins     Inserter
	cfg     Config
	wake    chan struct{} // one token: rows are waiting in next
	stop    chan struct{} // closed by Close
	flush   chan chan struct{}
	done    chan struct{}
	jobs    chan []piece // to the ledger goroutine
	jobDone chan jobResult

	mu     sync.Mutex
	next   *commit       // the rows of the next journal append
	room   chan struct{} // closed when next is taken: wakes Submits waiting for room
	spare  []store.UsageRow
	closed bool

	// file guards the active file and what goes with it (active, pending,
	// unsent, fromFile, failing, epoch, nextFile) against Submit's direct
	// appends; it is taken after mu, and never held while waiting on the
	// database or a timer.
	file sync.Mutex

	// Owned by the journal goroutine, under file where Submit appends.
	active     *journalFile
	pending    []piece          // handed off, not yet stored; oldest first
	epoch      uint64           // of the latest activation of a journal file
	nextFile   int              // number of the next journal file to create
	unsent     []store.UsageRow // the active file's rows, for the ledger
	fromFile   bool             // unsent is incomplete: read the file back
	busy       bool             // the ledger goroutine has a job
	failing    bool             // the last job failed: hand off on retry only
	lastAppend time.Time        // start of the latest journal append
	// beforeAppend, when set (tests), runs before each journal append.
	beforeAppend func()

	// Free journal files, shared by both goroutines.
	freeMu sync.Mutex
	free   []*journalFile

	activeRows, activeBytes   atomic.Int64 // in the active journal file
	pendingRows, pendingBytes atomic.Int64 // in pending files
	written                   atomic.Int64
}

// piece is one pending spool file for the ledger goroutine, with its rows
// when they are in memory.
type piece struct {
	file        *journalFile
	rows        []store.UsageRow
	count, size int64
}

// jobResult says how many pieces of a job were stored, in order, before err.
type jobResult struct {
	stored int
	err    error
}

// spoolState is what New found on disk.
type spoolState struct {
	pending []piece
	free    []*journalFile
	next    int
	epoch   uint64
}

func (st *spoolState) close() {
	for _, p := range st.pending {
		if p.file != nil {
			_ = p.file.close()
		}
	}
	for _, j := range st.free {
		_ = j.close()
	}
}

// commit is one journal append: the rows submitted while the previous one
// ran. done is closed once they are durable, or with err when they are not.
type commit struct {
	rows  []store.UsageRow
	done  chan struct{}
	err   error
	acked bool
}

func (c *commit) ack(err error) {
	if c.acked {
		return
	}
	c.acked, c.err = true, err
	close(c.done)
}

// Ack tells when a submitted row is durable.
type Ack struct{ c *commit }

// Wait blocks until the row is fsynced to the spool or in the database
// (nil), or the writer failed to store it (ErrNotDurable; the writer keeps
// retrying), or ctx ends (ctx's error; the row stays queued either way).
func (a Ack) Wait(ctx context.Context) error {
	select {
	case <-a.c.done:
		return a.c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when Wait would return without blocking.
func (a Ack) Done() <-chan struct{} { return a.c.done }

// New opens the spool (replaying any rows a previous run left there as soon
// as the database answers) and starts the writer.
func New(ins Inserter, cfg Config) (*Writer, error) {
	if cfg.SpoolPath == "" {
		return nil, errors.New("usagelog: SpoolPath is required")
	}
	cfg.defaults()
	st, err := recoverSpool(cfg.SpoolPath)
	if err != nil {
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	w, err := start(ins, cfg, st)
	if err != nil {
		return nil, fmt.Errorf("usagelog: %w", err)
	}
	return w, nil
}

// recoverSpool reads the spool files a previous run left: files with rows
// are pending, oldest first; empty journal files are free.
func recoverSpool(path string) (spoolState, error) {
	var st spoolState
	paths, err := journalPaths(path)
	if err != nil {
		return st, err
	}
	var used []piece
	for _, p := range paths {
		j, err := openJournal(p)
		if err != nil {
			st.close()
			return st, err
		}
		st.epoch = max(st.epoch, j.epoch)
		if j.rows == 0 {
			st.free = append(st.free, j)
		} else {
			used = append(used, piece{file: j, count: j.rows, size: j.off})
		}
	}
	slices.SortFunc(used, func(a, b piece) int { return cmp.Compare(a.file.epoch, b.file.epoch) })
	st.pending = append(st.pending, used...)
	st.next = len(paths)
	return st, nil
}

// start starts a writer on the spool files in st.
func start(ins Inserter, cfg Config, st spoolState) (*Writer, error) {
	w := &Writer{
		ins:      ins,
		cfg:      cfg,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		flush:    make(chan chan struct{}),
		done:     make(chan struct{}),
		jobs:     make(chan []piece),
		jobDone:  make(chan jobResult, 1),
		next:     &commit{done: make(chan struct{})},
		room:     make(chan struct{}),
		pending:  st.pending,
		free:     st.free,
		nextFile: st.next,
		epoch:    st.epoch,
	}
	for _, p := range st.pending {
		w.pendingRows.Add(p.count)
		w.pendingBytes.Add(p.size)
	}
	for len(w.free) > keepFree+1 { // more than a previous run needed at once
		w.drop(w.takeFree())
	}
	if err := w.activateNext(); err != nil {
		st.close()
		return nil, err
	}
	go w.ledger()
	go w.run()
	return w, nil
}

// Submit adds row to the next journal append and returns its Ack. It blocks
// while the queue is full and returns ctx's error if ctx ends first; the row
// is then not queued. A queued row is written even if nobody waits for it.
func (w *Writer) Submit(ctx context.Context, row store.UsageRow) (Ack, error) {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return Ack{}, ErrClosed
		}
		// DurableProcess: the row appends itself (appendNow); the journal
		// goroutine appends only what is queued below.
		if w.cfg.Durability == DurableProcess && w.appendNow(row) {
			w.mu.Unlock()
			return Ack{appended}, nil
		}
		if len(w.next.rows) < w.cfg.QueueSize {
			w.next.rows = append(w.next.rows, row)
			c := w.next
			w.mu.Unlock()
			select {
			case w.wake <- struct{}{}:
			default: // a wake-up is pending; that append takes this row too
			}
			return Ack{c}, nil
		}
		room := w.room
		w.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return Ack{}, ctx.Err()
		}
	}
}

// Write submits row and waits until it is durable (see Ack.Wait).
func (w *Writer) Write(ctx context.Context, row store.UsageRow) error {
	a, err := w.Submit(ctx, row)
	if err != nil {
		return err
	}
	return a.Wait(ctx)
}

// Flush waits until everything submitted so far is journaled and then
// inserted into the database (or failed to be, and stays spooled).
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

// Close stops accepting rows, journals every queued row and inserts the
// spool once more. It returns ErrSpooled when rows remain in the spool (safe
// on disk, replayed by the next Writer on the same path).
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.stop)
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

// QueueDepth is the number of rows waiting for the next journal append.
func (w *Writer) QueueDepth() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.next.rows)
}

// SpoolRows is the number of rows in the journal and spool files: rows not
// yet in the database. Normally at most one FlushInterval's worth.
func (w *Writer) SpoolRows() int64 { return w.activeRows.Load() + w.pendingRows.Load() }

// SpoolBytes is the size of the journal and spool files.
func (w *Writer) SpoolBytes() int64 { return w.activeBytes.Load() + w.pendingBytes.Load() }

// Written is the number of rows newly inserted into the database.
func (w *Writer) Written() int64 { return w.written.Load() }

// run is the journal goroutine.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.cfg.FlushInterval)
	defer tick.Stop()
	retry := time.NewTicker(w.cfg.RetryInterval)
	defer retry.Stop()
	w.handOff(true) // what a previous run left
	for {
		select {
		case <-w.wake:
			if wait := w.cfg.GroupWindow - time.Since(w.lastAppend); wait > 0 {
				time.Sleep(wait) // busy: let more rows join this append
			}
			w.commitNext()
			w.handOffIfDue()
		case <-tick.C:
			w.handOff(false)
		case <-retry.C:
			if w.failing {
				w.handOff(true)
			}
		case res := <-w.jobDone:
			w.jobEnded(res)
			w.handOffIfDue()
		case ack := <-w.flush:
			w.commitNext()
			w.waitJob()
			w.handOff(true)
			w.waitJob()
			close(ack)
		case <-w.stop:
			w.commitNext() // Submit refuses rows from now on: this is the last
			w.waitJob()
			w.handOff(true)
			w.waitJob()
			close(w.jobs)
			w.closeFiles()
			return
		}
	}
}

// commitNext takes the rows submitted so far, makes them durable and
// acknowledges them. Rows submitted meanwhile go to the next append.
func (w *Writer) commitNext() {
	w.mu.Lock()
	c := w.next
	if len(c.rows) == 0 {
		w.mu.Unlock()
		return
	}
	w.next = &commit{rows: w.spare[:0], done: make(chan struct{})}
	w.spare = nil
	close(w.room)
	w.room = make(chan struct{})
	w.mu.Unlock()

	w.lastAppend = time.Now()
	w.journal(c)
	clear(c.rows) // the rows' strings can go; the slice is reused
	w.mu.Lock()
	w.spare, c.rows = c.rows[:0], nil
	w.mu.Unlock()
}

// journal appends a commit's rows to the journal (one write, one fsync)
// and acknowledges them. If the journal cannot take them (disk full or
// failing) they are inserted into the database directly. If that fails
// too, the commit is acknowledged with ErrNotDurable, so no client waits
// on a retry loop, and the rows are retried here until they are stored;
// Submit blocks behind (back-pressure, no loss).
func (w *Writer) journal(c *commit) {
	for attempt := 0; ; attempt++ {
		if w.beforeAppend != nil {
			w.beforeAppend()
		}
		_, err := w.appendLocked(c.rows)
		if err == nil {
			c.ack(nil)
			return
		}
		ierr := w.insert(c.rows)
		if ierr == nil {
			c.ack(nil)
			return
		}
		w.cfg.Logger.Error("usage spool append and insert failed; retrying", "rows", len(c.rows), "attempt", attempt,
			"spoolErr", err, "insertErr", ierr)
		c.ack(fmt.Errorf("%w: %w", ErrNotDurable, err))
		time.Sleep(w.cfg.RetryInterval)
	}
}

// appendLocked appends rows to the journal and keeps them for the ledger,
// under file. full reports that the active file has just reached a batch.
func (w *Writer) appendLocked(rows []store.UsageRow) (full bool, err error) {
	w.file.Lock()
	defer w.file.Unlock()
	if err := w.appendRows(rows); err != nil {
		return false, err
	}
	w.keepUnsent(rows)
	batch := int64(w.cfg.BatchSize)
	return w.active.rows >= batch && w.active.rows-int64(len(rows)) < batch, nil
}

// appended is the Ack of a row Submit appended itself: durable on return.
var appended = func() *commit {
	c := &commit{done: make(chan struct{})}
	c.ack(nil)
	return c
}()

// appendNow appends one row to the journal in the caller's goroutine, with
// mu held, and reports whether it did. With DurableProcess an append is a
// copy into the mapped file (spool.go), cheaper than the hand-over to the
// journal goroutine it saves: the wake-up, the group window, the
// acknowledgement's wake-up of the caller.
// A failed append leaves the row to the queue, where the journal goroutine
// retries it, falls back to the database and reports.
func (w *Writer) appendNow(row store.UsageRow) bool {
	full, err := w.appendLocked([]store.UsageRow{row})
	if err != nil {
		return false
	}
	if full {
		select { // a batch is due: the journal goroutine hands it off
		case w.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// keepUnsent remembers journaled rows for the next hand-off, unless the
// database is failing or slow: then the journal is read back instead.
func (w *Writer) keepUnsent(rows []store.UsageRow) {
	if w.fromFile {
		return
	}
	if w.failing || len(w.unsent)+len(rows) > maxUnsent*w.cfg.BatchSize {
		w.unsent, w.fromFile = nil, true
		return
	}
	w.unsent = append(w.unsent, rows...)
}

// appendRows writes rows as one block to the active journal file and syncs
// it. A block that does not fit the file's room goes to a fresh file.
func (w *Writer) appendRows(rows []store.UsageRow) error {
	defer w.publishActive()
	w.active.encode(rows)
	if !w.active.fits(w.active.buf.Len()) {
		if err := w.rotate(); err != nil {
			// No fresh file: the block grows this one, which is as safe.
			w.cfg.Logger.Error("usage spool rotate", "err", err)
		} else {
			w.active.encode(rows)
		}
	}
	return w.active.write(len(rows))
}

// handOff rotates the journal and gives the ledger goroutine every pending
// file, oldest first. Unless force, it does nothing while the database is
// failing (the retry ticker forces).
func (w *Writer) handOff(force bool) {
	w.file.Lock()
	defer w.file.Unlock()
	if w.busy || (w.failing && !force) || w.SpoolRows() == 0 {
		return
	}
	if err := w.rotate(); err != nil {
		w.cfg.Logger.Error("usage spool rotate", "err", err)
	}
	if len(w.pending) == 0 {
		return
	}
	w.busy = true
	w.jobs <- slices.Clone(w.pending)
}

// handOffIfDue hands off when the active file holds a batch or files are
// pending.
func (w *Writer) handOffIfDue() {
	w.file.Lock()
	due := w.active.rows >= int64(w.cfg.BatchSize) || len(w.pending) > 0
	w.file.Unlock()
	if due {
		w.handOff(false)
	}
}

// rotate makes the active journal file pending, with its rows when they are
// in memory, and activates a free one.
func (w *Writer) rotate() error {
	old := w.active
	if old.rows == 0 {
		return nil
	}
	if err := w.activateNext(); err != nil {
		return err
	}
	p := piece{file: old, count: old.rows, size: old.off, rows: w.unsent}
	if w.fromFile {
		p.rows = nil
	}
	w.unsent, w.fromFile = nil, false
	w.pending = append(w.pending, p)
	w.pendingRows.Add(p.count)
	w.pendingBytes.Add(p.size)
	return nil
}

// activateNext makes a free journal file, or a new one, the active file
// under a new epoch.
func (w *Writer) activateNext() error {
	j := w.takeFree()
	for j == nil {
		var err error
		j, err = createJournal(journalPath(w.cfg.SpoolPath, w.nextFile), w.cfg.Durability != DurableProcess)
		w.nextFile++
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	w.epoch = max(w.epoch+1, uint64(time.Now().UnixNano()))
	j.activate(w.epoch, w.cfg.Durability == DurableProcess)
	w.active = j
	w.publishActive()
	return nil
}

func (w *Writer) takeFree() *journalFile {
	w.freeMu.Lock()
	defer w.freeMu.Unlock()
	n := len(w.free)
	if n == 0 {
		return nil
	}
	j := w.free[n-1]
	w.free = w.free[:n-1]
	return j
}

// release returns a stored, erased file to the free ones, or deletes it
// when enough are free.
func (w *Writer) release(j *journalFile) {
	w.freeMu.Lock()
	if len(w.free) < keepFree {
		w.free = append(w.free, j)
		j = nil
	}
	w.freeMu.Unlock()
	if j != nil {
		w.drop(j)
	}
}

func (w *Writer) drop(j *journalFile) {
	_ = j.close()
	if err := os.Remove(j.path); err != nil {
		w.cfg.Logger.Warn("usage spool: remove a spare file", "err", err)
	}
}

// closeFiles closes every journal file; what they hold stays on disk.
func (w *Writer) closeFiles() {
	w.file.Lock()
	defer w.file.Unlock()
	if err := w.active.close(); err != nil {
		w.cfg.Logger.Error("usage spool close", "err", err)
	}
	for _, p := range w.pending {
		if p.file != nil {
			_ = p.file.close()
		}
	}
	for j := w.takeFree(); j != nil; j = w.takeFree() {
		_ = j.close()
	}
}

func (w *Writer) waitJob() {
	if w.busy {
		w.jobEnded(<-w.jobDone)
	}
}

func (w *Writer) jobEnded(res jobResult) {
	w.file.Lock()
	defer w.file.Unlock()
	w.busy = false
	w.pending = append(w.pending[:0:0], w.pending[res.stored:]...)
	switch {
	case res.err != nil:
		if !w.failing {
			w.cfg.Logger.Warn("usage insert failed; rows stay in the spool until the database answers", "rows", w.SpoolRows(), "err", res.err)
		}
		w.failing = true
		w.unsent, w.fromFile = nil, w.active.rows > 0
		for i := range w.pending {
			w.pending[i].rows = nil // read back on retry: memory stays bounded
		}
	case w.failing:
		w.cfg.Logger.Info("usage spool replayed")
		w.failing = false
	}
}

// ledger is the ledger goroutine: it inserts the pieces of each job in
// order and frees each one when all its rows are in. It touches only the
// pieces' files.
func (w *Writer) ledger() {
	for job := range w.jobs {
		w.jobDone <- w.store(job)
	}
}

func (w *Writer) store(job []piece) jobResult {
	for i, p := range job {
		if err := w.storePiece(p); err != nil {
			return jobResult{stored: i, err: err}
		}
		w.pendingRows.Add(-p.count)
		w.pendingBytes.Add(-p.size)
	}
	return jobResult{stored: len(job)}
}

// storePiece inserts a piece's rows, then erases its journal file for reuse.
func (w *Writer) storePiece(p piece) error {
	var err error
	if p.rows != nil {
		err = w.insert(p.rows)
	} else {
		err = w.insertScanned(func(fn func(store.UsageRow) error) error {
			_, _, _, err := p.file.scan(fn)
			return err
		})
	}
	if err != nil {
		return err
	}
	if err := p.file.erase(); err != nil {
		return err // stored: the retry inserts nothing new and erases again
	}
	w.release(p.file)
	return nil
}

// insertScanned inserts the rows a scan yields, in batches. Rows inserted
// before a failure are skipped next time by their unique request ID.
func (w *Writer) insertScanned(scan func(func(store.UsageRow) error) error) error {
	batch := make([]store.UsageRow, 0, w.cfg.BatchSize)
	err := scan(func(r store.UsageRow) error {
		batch = append(batch, r)
		if len(batch) < w.cfg.BatchSize {
			return nil
		}
		err := w.insertBatch(batch)
		batch = batch[:0]
		return err
	})
	if err == nil && len(batch) > 0 {
		err = w.insertBatch(batch)
	}
	return err
}

// insert writes rows in inserts of at most BatchSize rows.
func (w *Writer) insert(rows []store.UsageRow) error {
	for len(rows) > 0 {
		n := min(len(rows), w.cfg.BatchSize)
		if err := w.insertBatch(rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (w *Writer) insertBatch(rows []store.UsageRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.InsertTimeout)
	defer cancel()
	n, err := w.ins.InsertUsage(ctx, rows)
	if err != nil {
		return err
	}
	w.written.Add(int64(n))
	return nil
}

func (w *Writer) publishActive() {
	w.activeRows.Store(w.active.rows)
	w.activeBytes.Store(w.active.off)
}
