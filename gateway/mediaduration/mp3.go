package mediaduration

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// mp3 reads the first MPEG audio frame after any ID3v2 tag. A Xing/Info or
// VBRI header in that frame gives the frame count (variable bit rate);
// without one the stream is constant bit rate and its length follows from
// the byte count and the bit rate.
func mp3(r io.ReadSeeker, size int64) (time.Duration, error) {
	var start int64
	var id3 [10]byte
	if _, err := io.ReadFull(r, id3[:]); err != nil {
		return 0, err
	}
	if string(id3[:3]) == "ID3" {
		n := int64(id3[6]&0x7f)<<21 | int64(id3[7]&0x7f)<<14 | int64(id3[8]&0x7f)<<7 | int64(id3[9]&0x7f)
		start = 10 + n
		if id3[5]&0x10 != 0 { // footer present
			start += 10
		}
	}
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	// The first frame starts at the tag's end, give or take some padding.
	buf := make([]byte, 4096+2048)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, err
	}
	buf = buf[:n]
	for i := 0; i+4 <= len(buf) && i < 4096; i++ {
		f, ok := parseFrame(buf[i:])
		if !ok {
			continue
		}
		// Two frames in a row, to not take a stray 0xFF for a header.
		if j := i + f.length; j+4 <= len(buf) {
			if _, ok := parseFrame(buf[j:]); !ok {
				continue
			}
		}
		if frames, ok := vbrFrames(buf[i:], f); ok {
			return seconds(float64(frames)*float64(f.samples), float64(f.rate))
		}
		audio := size - start - int64(i)
		return seconds(float64(audio)*8, float64(f.bitrate))
	}
	return 0, errors.New("no MPEG audio frame found")
}

type frame struct {
	mpeg1   bool
	mono    bool
	bitrate int // bits per second
	rate    int // samples per second
	samples int // per frame
	length  int // bytes
}

var (
	bitratesV1L3 = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}
	bitratesV2L3 = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0}
	sampleRates  = [3]int{44100, 48000, 32000}
)

// parseFrame reads a Layer III frame header (the only layer MP3 files use).
func parseFrame(b []byte) (frame, bool) {
	if len(b) < 4 || b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return frame{}, false
	}
	version := (b[1] >> 3) & 3 // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
	layer := (b[1] >> 1) & 3   // 1: Layer III
	bi, si := b[2]>>4, (b[2]>>2)&3
	if version == 1 || layer != 1 || bi == 0 || bi == 15 || si == 3 {
		return frame{}, false
	}
	f := frame{mpeg1: version == 3, mono: b[3]>>6 == 3, rate: sampleRates[si]}
	if f.mpeg1 {
		f.bitrate, f.samples = bitratesV1L3[bi]*1000, 1152
	} else {
		f.bitrate, f.samples = bitratesV2L3[bi]*1000, 576
		f.rate /= 2
		if version == 0 {
			f.rate /= 2
		}
	}
	padding := int(b[2]>>1) & 1
	f.length = f.samples/8*f.bitrate/f.rate + padding
	return f, f.length > 4
}

// vbrFrames returns the frame count of a Xing/Info or VBRI header in the
// frame at the start of b.
func vbrFrames(b []byte, f frame) (uint32, bool) {
	side := 32 // side information after the 4-byte header
	switch {
	case f.mpeg1 && f.mono:
		side = 17
	case !f.mpeg1 && !f.mono:
		side = 17
	case !f.mpeg1 && f.mono:
		side = 9
	}
	if x := 4 + side; x+12 <= len(b) && (string(b[x:x+4]) == "Xing" || string(b[x:x+4]) == "Info") {
		if binary.BigEndian.Uint32(b[x+4:x+8])&1 != 0 { // frames field present
			n := binary.BigEndian.Uint32(b[x+8 : x+12])
			return n, n > 0
		}
	}
	if v := 4 + 32; v+18 <= len(b) && string(b[v:v+4]) == "VBRI" {
		n := binary.BigEndian.Uint32(b[v+14 : v+18])
		return n, n > 0
	}
	return 0, false
}
