package mediaduration

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"time"
)

// EBML element IDs of a WebM (Matroska) file that lead to its duration.
const (
	idEBML          = 0x1A45DFA3
	idSegment       = 0x18538067
	idInfo          = 0x1549A966
	idTimecodeScale = 0x2AD7B1
	idDuration      = 0x4489
	idCluster       = 0x1F43B675
)

// webm reads Segment/Info: Duration (a float in TimecodeScale units,
// nanoseconds each by default). Elements before Info (SeekHead, Tracks)
// are skipped with a seek; the first Cluster ends the search, since Info
// precedes the media data.
func webm(r io.ReadSeeker) (time.Duration, error) {
	id, size, err := element(r)
	if err != nil {
		return 0, err
	}
	if id != idEBML {
		return 0, errors.New("not an EBML file")
	}
	if _, err := r.Seek(size, io.SeekCurrent); err != nil {
		return 0, err
	}
	if id, _, err = element(r); err != nil {
		return 0, err
	}
	if id != idSegment {
		return 0, errors.New("no Segment element")
	}
	for {
		id, size, err := element(r)
		if err != nil {
			return 0, err
		}
		switch id {
		case idInfo:
			if size < 0 || size > maxHeaderBox {
				return 0, errors.New("invalid Info element")
			}
			b := make([]byte, size)
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, err
			}
			return info(b)
		case idCluster:
			return 0, errors.New("no Info element before the media data")
		}
		if size < 0 {
			return 0, errors.New("an element of unknown size before Info")
		}
		if _, err := r.Seek(size, io.SeekCurrent); err != nil {
			return 0, err
		}
	}
}

func info(b []byte) (time.Duration, error) {
	scale := uint64(1_000_000)
	dur := -1.0
	rd := &sliceReader{b: b}
	for rd.off < len(b) {
		id, size, err := element(rd)
		if err != nil || size < 0 || rd.off+int(size) > len(b) {
			return 0, errors.New("invalid Info element")
		}
		v := b[rd.off : rd.off+int(size)]
		switch id {
		case idTimecodeScale:
			scale = 0
			for _, c := range v {
				scale = scale<<8 | uint64(c)
			}
		case idDuration:
			switch len(v) {
			case 4:
				dur = float64(math.Float32frombits(binary.BigEndian.Uint32(v)))
			case 8:
				dur = math.Float64frombits(binary.BigEndian.Uint64(v))
			}
		}
		rd.off += int(size)
	}
	if dur < 0 {
		return 0, errors.New("no Duration in Info (a live stream)")
	}
	return seconds(dur*float64(scale), float64(time.Second))
}

// element reads an EBML element header: its ID and its data size (-1 when
// unknown).
func element(r io.Reader) (id uint32, size int64, err error) {
	first, n, err := vint(r, 4)
	if err != nil {
		return 0, 0, err
	}
	id = uint32(first) | uint32(1)<<(7*n) // IDs keep their length marker
	raw, m, err := vint(r, 8)
	if err != nil {
		return 0, 0, err
	}
	if raw == 1<<(7*m)-1 {
		return id, -1, nil
	}
	return id, int64(raw), nil
}

// vint reads an EBML variable-length integer of at most maxLen bytes and
// returns its value without the length marker and its length.
func vint(r io.Reader, maxLen int) (uint64, int, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return 0, 0, err
	}
	n := 1
	for mask := byte(0x80); n <= 8 && b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if n > maxLen {
		return 0, 0, errors.New("invalid EBML number")
	}
	if _, err := io.ReadFull(r, b[1:n]); err != nil {
		return 0, 0, err
	}
	v := uint64(b[0] & (0xff >> n))
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, nil
}

type sliceReader struct {
	b   []byte
	off int
}

func (s *sliceReader) Read(p []byte) (int, error) {
	if s.off >= len(s.b) {
		return 0, io.EOF
	}
	n := copy(p, s.b[s.off:])
	s.off += n
	return n, nil
}
