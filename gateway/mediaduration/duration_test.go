package mediaduration_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/mediaduration"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
)

// countingSeeker counts the bytes read, to show the media data is skipped.
type countingSeeker struct {
	io.ReadSeeker
	read int64
}

func (c *countingSeeker) Read(p []byte) (int, error) {
	n, err := c.ReadSeeker.Read(p)
	c.read += int64(n)
	return n, err
}

// xingMP3 is a VBR MP3: an ID3v2 tag, a first frame carrying a Xing header
// with frames, then that many silent frames.
func xingMP3(frames uint32) []byte {
	var b bytes.Buffer
	b.Write([]byte{'I', 'D', '3', 4, 0, 0, 0, 0, 0, 20})
	b.Write(make([]byte, 20))
	first := make([]byte, 417)
	copy(first, []byte{0xff, 0xfb, 0x90, 0x64})
	copy(first[36:], "Xing")
	binary.BigEndian.PutUint32(first[40:], 1) // frames field present
	binary.BigEndian.PutUint32(first[44:], frames)
	b.Write(first)
	b.Write(uploadstest.MP3(int(frames)))
	return b.Bytes()
}

func TestOf(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		mime string
		data []byte
		want time.Duration
	}{
		{"mp4, moov first", "video/mp4", uploadstest.Movie("isom", 12.5, mib, false), 12500 * time.Millisecond},
		{"mp4, moov after the media data", "video/mp4", uploadstest.Movie("isom", 3, mib, true), 3 * time.Second},
		{"mov", "video/quicktime", uploadstest.Movie("qt  ", 7, 1000, false), 7 * time.Second},
		{"m4a", "audio/mp4", uploadstest.Movie("M4A ", 9.25, 1000, true), 9250 * time.Millisecond},
		{"webm", "video/webm", uploadstest.WebMMovie(16.5, mib), 16500 * time.Millisecond},
		{"wav", "audio/wav", uploadstest.WAV(8000 * 2), 2 * time.Second},
		// Constant bit rate: bytes × 8 / 128 kbit/s (the fixture's frames
		// carry no padding byte, so they are 417 bytes, not 417.96).
		{"mp3, constant bit rate", "audio/mpeg", uploadstest.MP3(383), 383 * 417 * 8 * time.Second / 128000},
		{"mp3, Xing header", "audio/mpeg", xingMP3(766), 20010 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &countingSeeker{ReadSeeker: bytes.NewReader(tc.data)}
			d, err := mediaduration.Of(r, int64(len(tc.data)), tc.mime)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d).To(BeNumerically("~", tc.want, 10*time.Millisecond))
			g.Expect(r.read).To(BeNumerically("<", 8<<10), "only the headers are read")
		})
	}

	for _, tc := range []struct{ name, mime string }{{"mp4 without moov", "video/mp4"}, {"webm without Info", "video/webm"}} {
		t.Run(tc.name, func(t *testing.T) {
			data := uploadstest.MP4("isom", 64)
			if tc.mime == "video/webm" {
				data = uploadstest.WebM(64)
			}
			_, err := mediaduration.Of(bytes.NewReader(data), int64(len(data)), tc.mime)
			NewWithT(t).Expect(errors.Is(err, mediaduration.ErrUnknown)).To(BeTrue(), "%v", err)
		})
	}
}

func FuzzOf(f *testing.F) {
	f.Add(uploadstest.Movie("isom", 1, 10, true), "video/mp4")
	f.Add(uploadstest.WebMMovie(1, 10), "video/webm")
	f.Add(xingMP3(3), "audio/mpeg")
	f.Add(uploadstest.WAV(10), "audio/wav")
	f.Fuzz(func(t *testing.T, data []byte, mime string) {
		d, err := mediaduration.Of(bytes.NewReader(data), int64(len(data)), mime)
		if err == nil && d <= 0 {
			t.Fatalf("duration %v without an error", d)
		}
	})
}
