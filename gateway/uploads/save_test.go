package uploads_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
)

func openBlobs(t testing.TB) (*blob.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := blob.OpenLocal(blob.Config{Dir: dir, SigningKey: []byte("0123456789abcdef0123"), BaseURL: func() string { return "http://gw" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

func files(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestSaveDecidesTheTypeFromTheBytes(t *testing.T) {
	blobs, _ := openBlobs(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		kind    *uploads.Kind
		data    []byte
		mime    string
		ext     string
		refused bool
	}{
		{name: "png", kind: uploads.Image, data: uploadstest.PNG(32, 24), mime: "image/png", ext: ".png"},
		{name: "jpeg", kind: uploads.Image, data: uploadstest.JPEG(32, 24), mime: "image/jpeg", ext: ".jpg"},
		{name: "gif", kind: uploads.Image, data: uploadstest.GIF(16, 16), mime: "image/gif", ext: ".gif"},
		{name: "webp", kind: uploads.Image, data: uploadstest.WebP(), mime: "image/webp", ext: ".webp"},
		{name: "wav", kind: uploads.Audio, data: uploadstest.WAV(4000), mime: "audio/wav", ext: ".wav"},
		{name: "mp3", kind: uploads.Audio, data: uploadstest.MP3(10), mime: "audio/mpeg", ext: ".mp3"},
		{name: "m4a", kind: uploads.Audio, data: uploadstest.M4A(5000), mime: "audio/mp4", ext: ".m4a"},
		{name: "png to audio", kind: uploads.Audio, data: uploadstest.PNG(8, 8), refused: true},
		{name: "wav to image", kind: uploads.Image, data: uploadstest.WAV(100), refused: true},
		{name: "text to image", kind: uploads.Image, data: []byte("just some text, not a picture\n"), refused: true},
		{name: "empty", kind: uploads.Image, data: nil, refused: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			obj, err := uploads.Save(ctx, blobs, c.kind, "t/"+c.name, bytes.NewReader(c.data))
			if c.refused {
				g.Expect(errors.Is(err, uploads.ErrUnsupportedType)).To(BeTrue(), "%v", err)
				_, err := blobs.Open(ctx, "t/"+c.name+".png")
				g.Expect(err).To(MatchError(blob.ErrNotFound))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(obj).To(Equal(uploads.Object{Key: "t/" + c.name + c.ext, MimeType: c.mime, Size: int64(len(c.data))}))
			rd, err := blobs.Open(ctx, obj.Key)
			g.Expect(err).NotTo(HaveOccurred())
			defer rd.Close()
			got, _ := io.ReadAll(rd)
			g.Expect(got).To(Equal(c.data))
			g.Expect(rd.ContentType()).To(Equal(c.mime))
		})
	}
}

func TestSaveAcceptsExactlyTheLimit(t *testing.T) {
	g := NewWithT(t)
	blobs, _ := openBlobs(t)
	obj, err := uploads.Save(context.Background(), blobs, uploads.Image, "t/max",
		uploadstest.Endless(uploadstest.PNG(4, 4), uploads.Image.MaxBytes))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obj.Size).To(Equal(uploads.Image.MaxBytes))
}

// An oversize file is refused while streaming: nothing is left in the
// store, and the bytes allocated stay a small fraction of the file.
func TestSaveRefusesOversizeFilesWhileStreaming(t *testing.T) {
	for _, c := range []struct {
		kind *uploads.Kind
		head []byte
		size int64
	}{
		{uploads.Image, uploadstest.PNG(4, 4), 11 << 20},
		{uploads.Audio, uploadstest.WAV(100), 51 << 20},
	} {
		t.Run(c.kind.Name, func(t *testing.T) {
			g := NewWithT(t)
			blobs, dir := openBlobs(t)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := uploads.Save(context.Background(), blobs, c.kind, "t/big", uploadstest.Endless(c.head, c.size))
			runtime.ReadMemStats(&after)
			g.Expect(err).To(MatchError(uploads.ErrTooLarge))
			g.Expect(files(dir)).To(BeEmpty(), "no partial object or temporary file")
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s of %d MiB refused: %d KiB allocated in total", c.kind.Name, c.size>>20, allocated>>10)
			// About 1 MiB whatever the size (gocloud's copy buffer and the
			// sniffed prefix), never the file.
			g.Expect(allocated).To(BeNumerically("<", 2<<20), "streaming, not buffering")
		})
	}
}

// BenchmarkSaveRefusesAudioOver50MB reports the allocations of refusing a
// 51 MiB audio stream (go test -bench SaveRefuses -benchmem ./gateway/uploads/).
func BenchmarkSaveRefusesAudioOver50MB(b *testing.B) {
	blobs, _ := openBlobs(b)
	head := uploadstest.MP3(2)
	b.ReportAllocs()
	b.SetBytes(51 << 20)
	for b.Loop() {
		if _, err := uploads.Save(context.Background(), blobs, uploads.Audio, "t/big", uploadstest.Endless(head, 51<<20)); !errors.Is(err, uploads.ErrTooLarge) {
			b.Fatal(err)
		}
	}
}
