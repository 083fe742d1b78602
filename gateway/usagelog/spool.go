package usagelog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/modelgate/modelgate/gateway/store"
)

// The spool is a set of journal files, <SpoolPath>.journal-<n>, each
// preallocated to fileSize bytes of zeros and written in place. One file is
// active: row blocks are written into it at the next offset and
// fdatasynced before their rows are acknowledged. When it is handed to the
// database a free file becomes active; once every row of the handed file is
// stored, its first bytes are zeroed and it joins the free files again.
//
// Why in place: on ext4 an fdatasync that grows a file waits for a journal
// commit, which (data=ordered) also writes out other files' new data, here
// the ledger's and etcd's on the same disk. Overwriting blocks the file
// already has makes the sync a pure data flush: half the time idle, a
// fraction of it when the disk is busy (docs/performance.md). Rotation needs
// no rename and no directory sync on the acknowledgement path either: a
// file's name says nothing about its state, its records do.
//
// With DurableProcess nothing is synced, and the active file is mapped
// into memory (mapfile_linux.go): an append copies its block into the
// mapping instead of calling pwrite. Both put the bytes in the same page
// cache pages, which outlive the process; only a sync would make them
// outlive the machine. A block past the mapped fileSize bytes is written
// with pwrite.
//
// A record is one line: "<epoch> <crc> <row JSON>\n", the epoch 16 hex
// digits and the CRC-32C (of the epoch and the JSON) 8. Each activation of a
// file takes a new, larger epoch. A file's records are the lines from its
// start that carry the first line's epoch and a correct checksum; reading
// stops at the first line that does not (zeros, a torn write, or a record
// of an earlier use of the file). Replaying a record twice is harmless: the
// ledger skips request IDs it holds.

const (
	// fileSize is a journal file's preallocated size: a default batch
	// (5000 rows of about 600 bytes) with room to spare. A block that does
	// not fit makes the writer hand the file off early; a block larger than
	// a file grows it.
	fileSize = 4 << 20
	// keepFree is how many free files are kept besides the active one.
	keepFree = 2
	// eraseLen is how many bytes at the start of a stored file are zeroed,
	// enough to break its first record.
	eraseLen = 64
	// prefixLen is the length of "<epoch> <crc> ".
	prefixLen = 16 + 1 + 8 + 1
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	zeroPrefix [prefixLen]byte
)

// journalFile is one journal file.
type journalFile struct {
	path  string
	f     *os.File
	epoch uint64
	rows  int64
	off   int64 // end of the records written in this use
	// noSync skips the fdatasync of each block (DurableProcess).
	noSync bool
	// mem maps the file's first fileSize bytes while noSync: an append is
	// then a copy into the kernel's page cache, the same pages a pwrite
	// would fill, without the system call. A SIGKILL keeps them as it
	// keeps a pwrite's. Nil where the file could not be mapped.
	mem []byte
	buf bytes.Buffer
}

// createJournal makes a new journal file at path. With sync it is filled
// with zeros and synced, file and directory, so its blocks exist before the
// first in-place write; without (DurableProcess) it is only sized.
func createJournal(path string, sync bool) (*journalFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	j := &journalFile{path: path, f: f, noSync: !sync}
	if err := j.preallocate(sync); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create spool file %s: %w", path, err)
	}
	return j, nil
}

func (j *journalFile) preallocate(sync bool) error {
	if !sync {
		return j.f.Truncate(fileSize)
	}
	zeros := make([]byte, 1<<16)
	for off := int64(0); off < fileSize; off += int64(len(zeros)) {
		if _, err := j.f.WriteAt(zeros, off); err != nil {
			return err
		}
	}
	if err := syncData(j.f); err != nil {
		return err
	}
	return syncDir(filepath.Dir(j.path))
}

// openJournal opens an existing journal file and reads its records' count,
// size and epoch.
func openJournal(path string) (*journalFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open spool file: %w", err)
	}
	j := &journalFile{path: path, f: f}
	if j.rows, j.off, j.epoch, err = j.scan(nil); err != nil {
		_ = f.Close()
		return nil, err
	}
	return j, nil
}

// activate starts a new use of the file under epoch: its records are
// written from the start.
func (j *journalFile) activate(epoch uint64, noSync bool) {
	j.epoch, j.rows, j.off, j.noSync = epoch, 0, 0, noSync
	if noSync && j.mem == nil {
		j.mem = mapJournal(j.f)
	}
}

// encode renders rows as records of the file's epoch into j.buf.
func (j *journalFile) encode(rows []store.UsageRow) {
	j.buf.Reset()
	var epoch [16]byte
	hex.Encode(epoch[:], binary.BigEndian.AppendUint64(nil, j.epoch))
	for i := range rows {
		start := j.buf.Len()
		j.buf.Write(zeroPrefix[:])
		j.buf.Write(appendRow(j.buf.AvailableBuffer(), &rows[i]))
		j.buf.WriteByte('\n')
		line := j.buf.Bytes()[start:]
		doc := line[prefixLen : len(line)-1]
		sum := crc32.Update(crc32.Checksum(epoch[:], castagnoli), castagnoli, doc)
		copy(line, epoch[:])
		line[16] = ' '
		hex.Encode(line[17:25], binary.BigEndian.AppendUint32(nil, sum))
		line[25] = ' '
	}
}

// fits reports whether n more bytes fit the file's preallocated size. An
// empty file takes any block.
func (j *journalFile) fits(n int) bool { return j.off == 0 || j.off+int64(n) <= fileSize }

// write writes the encoded block at the end of the records and syncs it.
func (j *journalFile) write(count int) error {
	b := j.buf.Bytes()
	if j.noSync && j.off+int64(len(b)) <= int64(len(j.mem)) {
		copy(j.mem[j.off:], b)
	} else if _, err := j.f.WriteAt(b, j.off); err != nil {
		return fmt.Errorf("append spool: %w", err)
	}
	if !j.noSync {
		if err := syncData(j.f); err != nil {
			return fmt.Errorf("sync spool: %w", err)
		}
	}
	j.rows += int64(count)
	j.off += int64(j.buf.Len())
	return nil
}

// erase breaks the first record so the file reads as empty. It is not
// synced: a file whose erase a crash lost is replayed, which is harmless
// (the ledger skips request IDs it holds), and the next use of the file
// syncs its first append, which covers the erase too. The ledger's commit
// of the rows is durable before this (PostgreSQL; SQLite's writer commits
// with synchronous=FULL).
func (j *journalFile) erase() error {
	if len(j.mem) >= eraseLen {
		clear(j.mem[:eraseLen])
	} else if _, err := j.f.WriteAt(make([]byte, eraseLen), 0); err != nil {
		return fmt.Errorf("erase spool file: %w", err)
	}
	j.rows, j.off = 0, 0
	return nil
}

func (j *journalFile) close() error {
	if j.mem != nil {
		unmapJournal(j.mem)
		j.mem = nil
	}
	return j.f.Close()
}

// scan calls fn (when not nil) for each record of the file and returns the
// records' count, their end and their epoch.
func (j *journalFile) scan(fn func(store.UsageRow) error) (rows, end int64, epoch uint64, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(j.f, 0, 1<<62), 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = readLong(r, line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return rows, end, epoch, nil // a line without its newline is torn
			}
			return rows, end, epoch, fmt.Errorf("read spool %s: %w", j.path, err)
		}
		e, doc, ok := parseRecord(line)
		if !ok || (rows > 0 && e != epoch) {
			return rows, end, epoch, nil
		}
		epoch = e
		if fn != nil {
			var row store.UsageRow
			if err := json.Unmarshal(doc, &row); err != nil {
				// The checksum matched: this is no torn write but a row this
				// version cannot read. Stop rather than skip money.
				return rows, end, epoch, fmt.Errorf("%s record %d: %w", j.path, rows+1, err)
			}
			if err := fn(row); err != nil {
				return rows, end, epoch, err
			}
		}
		rows++
		end += int64(len(line))
	}
}

// readLong completes a line longer than the reader's buffer.
func readLong(r *bufio.Reader, first []byte) ([]byte, error) {
	line := append([]byte(nil), first...)
	rest, err := r.ReadBytes('\n')
	return append(line, rest...), err
}

// parseRecord checks a record line and returns its epoch and row JSON.
func parseRecord(line []byte) (epoch uint64, doc []byte, ok bool) {
	if len(line) < prefixLen+2 || line[16] != ' ' || line[25] != ' ' {
		return 0, nil, false
	}
	epoch, err := strconv.ParseUint(string(line[:16]), 16, 64)
	if err != nil {
		return 0, nil, false
	}
	sum, err := strconv.ParseUint(string(line[17:25]), 16, 32)
	if err != nil {
		return 0, nil, false
	}
	doc = line[prefixLen : len(line)-1]
	if crc32.Update(crc32.Checksum(line[:16], castagnoli), castagnoli, doc) != uint32(sum) {
		return 0, nil, false
	}
	return epoch, doc, true
}

// journalPaths lists the journal files of spoolPath.
func journalPaths(spoolPath string) ([]string, error) {
	paths, err := filepath.Glob(spoolPath + ".journal-*")
	if err != nil {
		return nil, fmt.Errorf("list spool files: %w", err)
	}
	slices.Sort(paths)
	return paths, nil
}

func journalPath(spoolPath string, n int) string {
	return fmt.Sprintf("%s.journal-%06d", spoolPath, n)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync spool dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync spool dir: %w", err)
	}
	return nil
}
