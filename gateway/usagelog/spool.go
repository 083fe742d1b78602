package usagelog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/modelgate/modelgate/gateway/store"
)

// The spool is an append-only JSON-lines journal (Config.SpoolPath) of rows
// not yet in the database. Each appended block is fsynced before its rows are
// acknowledged, so an acknowledged row survives a crash. To hand rows to the
// database without stopping the appender, the active file is renamed to a
// numbered segment (SpoolPath + ".replay-<n>") and a fresh active file is
// opened; segments are inserted in order and deleted only after every row in
// them is stored.

// segment is one spool file being appended to.
type segment struct {
	path  string
	f     *os.File
	rows  int64
	bytes int64
	// noSync skips the fdatasync of each append (DurableProcess).
	noSync bool
}

func openSegment(path string) (*segment, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	sg := &segment{path: path, f: f}
	sg.rows, sg.bytes, err = scanFile(path, func(store.UsageRow) error { return nil })
	if err == nil {
		// Cut a torn last line, or the next append would extend it into a
		// corrupt line.
		err = f.Truncate(sg.bytes)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open spool %s: %w", path, err)
	}
	return sg, nil
}

// append writes rows as one block and fsyncs it.
func (sg *segment) append(rows []store.UsageRow) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // Encode ends each row with '\n'
	for i := range rows {
		if err := enc.Encode(&rows[i]); err != nil {
			return fmt.Errorf("encode spool row: %w", err)
		}
	}
	if _, err := sg.f.Write(buf.Bytes()); err != nil {
		_ = sg.f.Truncate(sg.bytes) // a partial block would corrupt the next one
		return fmt.Errorf("append spool: %w", err)
	}
	if !sg.noSync {
		if err := syncData(sg.f); err != nil {
			_ = sg.f.Truncate(sg.bytes)
			return fmt.Errorf("sync spool: %w", err)
		}
	}
	sg.rows += int64(len(rows))
	sg.bytes += int64(buf.Len())
	return nil
}

// rotate renames the active file to the next replay segment and opens a
// fresh active file. It returns the segment's path.
func (sg *segment) rotate() (string, error) {
	seg := fmt.Sprintf("%s.replay-%020d", sg.path, time.Now().UnixNano())
	if err := sg.f.Close(); err != nil {
		return "", fmt.Errorf("close spool: %w", err)
	}
	if err := os.Rename(sg.path, seg); err != nil {
		return "", fmt.Errorf("rotate spool: %w", err)
	}
	if err := syncDir(filepath.Dir(sg.path)); err != nil {
		return "", err
	}
	f, err := os.OpenFile(sg.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open spool: %w", err)
	}
	sg.f, sg.rows, sg.bytes = f, 0, 0
	return seg, nil
}

func (sg *segment) close() error { return sg.f.Close() }

// replaySegments lists the replay segments of path, oldest first.
func replaySegments(path string) ([]string, error) {
	segs, err := filepath.Glob(path + ".replay-*")
	if err != nil {
		return nil, fmt.Errorf("list spool segments: %w", err)
	}
	slices.Sort(segs) // zero-padded numbers sort by age
	return segs, nil
}

// scanFile calls fn for each row of a spool file and returns the rows and
// bytes read. A torn last line (a crash in the middle of an append, which was
// never acknowledged) is skipped.
func scanFile(path string, fn func(store.UsageRow) error) (rows, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read spool: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return rows, size, nil // a line without its newline is torn: ignore it
		}
		if err != nil {
			return rows, size, fmt.Errorf("read spool: %w", err)
		}
		var row store.UsageRow
		if err := json.Unmarshal(line, &row); err != nil {
			return rows, size, fmt.Errorf("%s line %d: %w", path, rows+1, err)
		}
		if err := fn(row); err != nil {
			return rows, size, err
		}
		rows++
		size += int64(len(line))
	}
}

// countSegments sums the rows and bytes of replay segments.
func countSegments(segs []string) (rows, size int64, err error) {
	for _, s := range segs {
		r, b, err := scanFile(s, func(store.UsageRow) error { return nil })
		if err != nil {
			return 0, 0, err
		}
		rows, size = rows+r, size+b
	}
	return rows, size, nil
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
