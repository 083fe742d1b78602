package mediaduration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// ErrUnknown is wrapped when the headers do not give a duration.
var ErrUnknown = errors.New("the duration could not be read from the file's headers")

// maxHeaderBox bounds a header element read into memory (a moov box of a
// long, many-track file stays far below it).
const maxHeaderBox = 16 << 20

// Of returns the duration of a file of the given canonical MIME type
// (video/mp4, video/quicktime, audio/mp4, video/webm, audio/mpeg,
// audio/wav) read from r, which holds size bytes.
func Of(r io.ReadSeeker, size int64, mimeType string) (time.Duration, error) {
	var d time.Duration
	var err error
	switch mimeType {
	case "video/mp4", "video/quicktime", "audio/mp4":
		d, err = isoBMFF(r, size)
	case "video/webm":
		d, err = webm(r)
	case "audio/mpeg":
		d, err = mp3(r, size)
	case "audio/wav":
		d, err = wav(r)
	default:
		return 0, fmt.Errorf("%w: %s is not a probed type", ErrUnknown, mimeType)
	}
	if err != nil {
		if errors.Is(err, ErrUnknown) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %v", ErrUnknown, err)
	}
	if d <= 0 {
		return 0, ErrUnknown
	}
	return d, nil
}

func seconds(num, den float64) (time.Duration, error) {
	if den <= 0 || num < 0 || math.IsNaN(num) || math.IsInf(num, 0) || num/den > 1e7 {
		return 0, ErrUnknown
	}
	return time.Duration(num / den * float64(time.Second)), nil
}

// isoBMFF reads moov/mvhd of an MP4, MOV or M4A: timescale and duration.
// Top-level boxes before moov (mdat of a non-fast-start file) are skipped
// with a seek.
func isoBMFF(r io.ReadSeeker, size int64) (time.Duration, error) {
	var pos int64
	for pos < size {
		typ, body, next, err := boxHeader(r, pos, size)
		if err != nil {
			return 0, err
		}
		if typ == "moov" {
			if next-body > maxHeaderBox {
				return 0, errors.New("moov box too large")
			}
			buf := make([]byte, next-body)
			if _, err := io.ReadFull(r, buf); err != nil {
				return 0, err
			}
			return mvhd(buf)
		}
		pos = next
	}
	return 0, errors.New("no moov box")
}

// boxHeader reads the box header at pos and returns its type, where its
// body starts and where the next box starts; r is left at the body.
func boxHeader(r io.ReadSeeker, pos, limit int64) (typ string, body, next int64, err error) {
	if _, err = r.Seek(pos, io.SeekStart); err != nil {
		return
	}
	var h [16]byte
	if _, err = io.ReadFull(r, h[:8]); err != nil {
		return
	}
	n := int64(binary.BigEndian.Uint32(h[:4]))
	typ, body = string(h[4:8]), pos+8
	switch n {
	case 0: // to the end of the file
		n = limit - pos
	case 1:
		if _, err = io.ReadFull(r, h[8:16]); err != nil {
			return
		}
		n, body = int64(binary.BigEndian.Uint64(h[8:16])), pos+16
	}
	if n < body-pos || pos+n > limit {
		return "", 0, 0, fmt.Errorf("box %q has an invalid size", typ)
	}
	return typ, body, pos + n, nil
}

func mvhd(moov []byte) (time.Duration, error) {
	for len(moov) >= 8 {
		n := int(binary.BigEndian.Uint32(moov[:4]))
		if n < 8 || n > len(moov) {
			break
		}
		if string(moov[4:8]) == "mvhd" {
			b := moov[8:n]
			if len(b) < 4 {
				break
			}
			if b[0] == 1 && len(b) >= 32 { // version 1: 64-bit times
				return seconds(float64(binary.BigEndian.Uint64(b[24:32])), float64(binary.BigEndian.Uint32(b[20:24])))
			}
			if len(b) >= 20 {
				d := binary.BigEndian.Uint32(b[16:20])
				if d == math.MaxUint32 { // "unknown" (fragmented file)
					break
				}
				return seconds(float64(d), float64(binary.BigEndian.Uint32(b[12:16])))
			}
			break
		}
		moov = moov[n:]
	}
	return 0, errors.New("no usable mvhd box")
}

// wav reads the fmt chunk's byte rate and the data chunk's size; the
// samples themselves are skipped with a seek.
func wav(r io.ReadSeeker) (time.Duration, error) {
	var h [12]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	if string(h[:4]) != "RIFF" || string(h[8:12]) != "WAVE" {
		return 0, errors.New("not a RIFF/WAVE file")
	}
	var byteRate uint32
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return 0, err
		}
		n := int64(binary.LittleEndian.Uint32(ch[4:8]))
		switch string(ch[:4]) {
		case "fmt ":
			if n < 16 || n > 1<<16 {
				return 0, errors.New("invalid fmt chunk")
			}
			f := make([]byte, n)
			if _, err := io.ReadFull(r, f); err != nil {
				return 0, err
			}
			byteRate = binary.LittleEndian.Uint32(f[8:12])
			if n%2 == 1 {
				if _, err := r.Seek(1, io.SeekCurrent); err != nil {
					return 0, err
				}
			}
			continue
		case "data":
			if byteRate == 0 {
				return 0, errors.New("data chunk before a usable fmt chunk")
			}
			return seconds(float64(n), float64(byteRate))
		}
		if _, err := r.Seek(n+n%2, io.SeekCurrent); err != nil {
			return 0, err
		}
	}
}
