package usagelog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/modelgate/modelgate/gateway/store"
)

// spool is an append-only JSON-lines file of rows that could not be written
// to the database. Each appended batch is fsynced before the writer moves on,
// so a spooled row survives a crash; the file is truncated only after every
// row in it is in the database. Only the writer's goroutine touches it.
type spool struct {
	f     *os.File
	rows  int64
	bytes int64
}

func openSpool(path string) (*spool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	sp := &spool{f: f}
	if err := sp.scan(func(store.UsageRow) {}); err != nil {
		_ = f.Close()
		return nil, err
	}
	return sp, nil
}

// scan counts the file's rows and calls fn for each. A torn last line (a
// crash in the middle of an append that was never acknowledged) is skipped.
func (sp *spool) scan(fn func(store.UsageRow)) error {
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read spool: %w", err)
	}
	r := bufio.NewReaderSize(sp.f, 1<<16)
	var rows, size int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a line without its newline is torn: ignore it
		}
		if err != nil {
			return fmt.Errorf("read spool: %w", err)
		}
		size += int64(len(line))
		var row store.UsageRow
		if err := json.Unmarshal(line, &row); err != nil {
			return fmt.Errorf("spool line %d: %w", rows+1, err)
		}
		rows++
		fn(row)
	}
	sp.rows, sp.bytes = rows, size
	return nil
}

// append writes rows as one block and fsyncs it.
func (sp *spool) append(rows []store.UsageRow) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // Encode terminates each row with '\n'
	for i := range rows {
		if err := enc.Encode(&rows[i]); err != nil {
			return fmt.Errorf("encode spool row: %w", err)
		}
	}
	if _, err := sp.f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("append spool: %w", err)
	}
	if err := sp.f.Sync(); err != nil {
		return fmt.Errorf("sync spool: %w", err)
	}
	sp.rows += int64(len(rows))
	sp.bytes += int64(buf.Len())
	return nil
}

// reset empties the file after a complete replay.
func (sp *spool) reset() error {
	if err := sp.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate spool: %w", err)
	}
	if err := sp.f.Sync(); err != nil {
		return fmt.Errorf("sync spool: %w", err)
	}
	sp.rows, sp.bytes = 0, 0
	return nil
}

func (sp *spool) close() error { return sp.f.Close() }
