// Package uploadstest makes real small files of every accepted upload type,
// and endless ones, for tests of the upload endpoints.
package uploadstest

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
)

func picture(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / w), G: uint8(y * 255 / h), B: 128, A: 255})
		}
	}
	return img
}

// PNG encodes a w×h gradient with image/png.
func PNG(w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, picture(w, h)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// JPEG encodes a w×h gradient with image/jpeg.
func JPEG(w, h int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, picture(w, h), &jpeg.Options{Quality: 80}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// GIF encodes a w×h paletted gradient with image/gif.
func GIF(w, h int) []byte {
	img := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / w), G: uint8(y * 255 / h), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// WebP is a 1×1 lossless WebP (RIFF "WEBP" with a VP8L chunk).
func WebP() []byte {
	return []byte{
		'R', 'I', 'F', 'F', 0x1a, 0x00, 0x00, 0x00, 'W', 'E', 'B', 'P',
		'V', 'P', '8', 'L', 0x0d, 0x00, 0x00, 0x00,
		0x2f, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0x00,
	}
}

// WAV is a mono 16-bit PCM RIFF/WAVE file of a 440 Hz tone.
func WAV(samples int) []byte {
	const rate, bits, channels = 8000, 16, 1
	data := new(bytes.Buffer)
	for i := range samples {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
		_ = binary.Write(data, binary.LittleEndian, v)
	}
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + data.Len()))
	b.WriteString("WAVEfmt ")
	le(uint32(16))                         // fmt chunk size
	le(uint16(1))                          // PCM
	le(uint16(channels))                   //
	le(uint32(rate))                       //
	le(uint32(rate * channels * bits / 8)) // byte rate
	le(uint16(channels * bits / 8))        // block align
	le(uint16(bits))                       //
	b.WriteString("data")
	le(uint32(data.Len()))
	b.Write(data.Bytes())
	return b.Bytes()
}

// MP3 is frames MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, 417 bytes
// each) of silence, without an ID3 tag.
func MP3(frames int) []byte {
	frame := make([]byte, 417)
	copy(frame, []byte{0xff, 0xfb, 0x90, 0x64})
	return bytes.Repeat(frame, frames)
}

// M4A is an MPEG-4 audio file: an "ftyp" box with the "M4A " brand, then an
// "mdat" box of payload bytes.
func M4A(payload int) []byte {
	var b bytes.Buffer
	be := func(v any) { _ = binary.Write(&b, binary.BigEndian, v) }
	be(uint32(32))
	b.WriteString("ftypM4A ")
	be(uint32(0))
	b.WriteString("M4A mp42isom")
	be(uint32(0))
	be(uint32(8 + payload))
	b.WriteString("mdat")
	b.Write(make([]byte, payload))
	return b.Bytes()
}

// MP4 is an ISO base media file with a video brand and payload bytes of
// media data; brand "qt  " makes it a QuickTime movie (MOV).
func MP4(brand string, payload int) []byte {
	var b bytes.Buffer
	ftyp(&b, brand)
	mdat(&b, payload)
	return b.Bytes()
}

// ftyp writes an "ftyp" box of a major brand, compatible with mp41.
func ftyp(b *bytes.Buffer, brand string) {
	_ = binary.Write(b, binary.BigEndian, uint32(24))
	b.WriteString("ftyp" + brand)
	_ = binary.Write(b, binary.BigEndian, uint32(0x200))
	b.WriteString(brand + "mp41")
}

// mdat writes an "mdat" box of payload zero bytes.
func mdat(b *bytes.Buffer, payload int) {
	_ = binary.Write(b, binary.BigEndian, uint32(8+payload))
	b.WriteString("mdat")
	b.Write(make([]byte, payload))
}

// WebM is an EBML header with the "webm" doc type and a Segment element of
// payload bytes.
func WebM(payload int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x1A, 0x45, 0xDF, 0xA3, 0x9F}) // EBML, size 31
	b.Write([]byte{0x42, 0x86, 0x81, 0x01})       // EBMLVersion 1
	b.Write([]byte{0x42, 0xF7, 0x81, 0x01})       // EBMLReadVersion 1
	b.Write([]byte{0x42, 0xF2, 0x81, 0x04})       // EBMLMaxIDLength 4
	b.Write([]byte{0x42, 0xF3, 0x81, 0x08})       // EBMLMaxSizeLength 8
	b.Write([]byte{0x42, 0x82, 0x84})             // DocType, 4 bytes
	b.WriteString("webm")
	b.Write([]byte{0x42, 0x87, 0x81, 0x04}) // DocTypeVersion 4
	b.Write([]byte{0x42, 0x85, 0x81, 0x02}) // DocTypeReadVersion 2
	b.Write([]byte{0x18, 0x53, 0x80, 0x67, 0x01, 0, 0, 0, byte(payload >> 24), byte(payload >> 16), byte(payload >> 8), byte(payload)})
	b.Write(make([]byte, payload))
	return b.Bytes()
}

// Endless returns a reader of n bytes: head, then zeros, made as they are
// read (never held in memory).
func Endless(head []byte, n int64) io.Reader {
	return io.MultiReader(bytes.NewReader(head), io.LimitReader(zeros{}, n-int64(len(head))))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Movie is an ISO base media file of the given brand ("isom" MP4, "qt  "
// MOV, "M4A " audio) whose moov/mvhd gives seconds (timescale 1000), with
// payload bytes of media data; moovLast puts the moov box after the media
// data, as files that were not made for fast start have it.
func Movie(brand string, seconds float64, payload int, moovLast bool) []byte {
	var b bytes.Buffer
	be := func(v any) { _ = binary.Write(&b, binary.BigEndian, v) }
	ftyp(&b, brand)
	moov := func() {
		be(uint32(8 + 8 + 100))
		b.WriteString("moov")
		be(uint32(8 + 100))
		b.WriteString("mvhd")
		mv := make([]byte, 100) // version 0: times, timescale, duration, then rate, volume, matrix…
		binary.BigEndian.PutUint32(mv[12:16], 1000)
		binary.BigEndian.PutUint32(mv[16:20], uint32(seconds*1000))
		b.Write(mv)
	}
	if !moovLast {
		moov()
	}
	mdat(&b, payload)
	if moovLast {
		moov()
	}
	return b.Bytes()
}

// WebMMovie is a WebM file whose Segment/Info gives seconds (a float64
// Duration in milliseconds, the default TimecodeScale), then a Cluster of
// payload bytes.
func WebMMovie(seconds float64, payload int) []byte {
	head := WebM(0)
	head = head[:len(head)-12] // drop the empty Segment
	var seg bytes.Buffer
	seg.Write([]byte{0x15, 0x49, 0xA9, 0x66, 0x80 | 11})                     // Info, 11 bytes
	seg.Write([]byte{0x44, 0x89, 0x88})                                      // Duration, 8 bytes
	_ = binary.Write(&seg, binary.BigEndian, math.Float64bits(seconds*1000)) //
	seg.Write([]byte{0x1F, 0x43, 0xB6, 0x75, 0x01, 0, 0, 0, 0, 0, 0, 0})     // Cluster, 8-byte size
	binary.BigEndian.PutUint32(seg.Bytes()[seg.Len()-4:], uint32(payload))
	seg.Write(make([]byte, payload))
	var b bytes.Buffer
	b.Write(head)
	b.Write([]byte{0x18, 0x53, 0x80, 0x67, 0x01, 0, 0, 0, 0, 0, 0, 0})
	binary.BigEndian.PutUint32(b.Bytes()[b.Len()-4:], uint32(seg.Len()))
	b.Write(seg.Bytes())
	return b.Bytes()
}
