package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// A reader that fails half-way must leave neither the object nor a
// temporary file behind.
func TestPutThatFailsLeavesNoPartialObject(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	s, err := OpenLocal(Config{Dir: dir, SigningKey: []byte("0123456789abcdef0123"), BaseURL: func() string { return "http://x" }})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()

	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("a"), 100_000)), &failingReader{boom})
	_, err = s.Put(context.Background(), "t1/partial.bin", "application/octet-stream", r)
	g.Expect(err).To(MatchError(boom))

	_, err = s.Open(context.Background(), "t1/partial.bin")
	g.Expect(err).To(MatchError(ErrNotFound))
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	g.Expect(left).To(BeEmpty())
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }
