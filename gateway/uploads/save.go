package uploads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gabriel-vasile/mimetype"

	"github.com/modelgate/modelgate/gateway/platform/blob"
)

// SniffLen is how many leading bytes decide the type (mimetype's default
// read limit). Only this prefix is ever buffered.
const SniffLen = 3072

var (
	// ErrUnsupportedType: the bytes are none of the kind's types.
	ErrUnsupportedType = errors.New("unsupported file type")
	// ErrTooLarge: the stream is longer than the kind's limit.
	ErrTooLarge = errors.New("file too large")
	// ErrEmpty: the stream has no bytes; it is also ErrUnsupportedType.
	ErrEmpty = fmt.Errorf("%w: empty file", ErrUnsupportedType)
	// ErrRead: reading the source failed (not the store).
	ErrRead = errors.New("read failed")
)

// Kind is a family of accepted files: the types detected from the bytes and
// the size limit.
type Kind struct {
	// Name is "image", "audio" or "video"; also a segment of blob keys.
	Name string
	// MaxBytes is the largest accepted file.
	MaxBytes int64
	// Types maps a type mimetype detects to the canonical type reported and
	// stored, and the canonical type to its file extension.
	Types []Type
	// Excluded are detected types refused even though a parent is accepted
	// (an M4A audio is an MPEG-4 file, but not a video).
	Excluded []string
}

// Type is one accepted type.
type Type struct {
	// Detected are the MIME types mimetype reports for it (aliases included).
	Detected []string
	// Canonical is the type reported as mime_type and served.
	Canonical string
	// Ext is the extension of blob keys, with its dot.
	Ext string
}

// Image: JPEG, PNG, WebP or GIF, at most 10 MB.
var Image = &Kind{Name: "image", MaxBytes: 10 << 20, Types: []Type{
	{Detected: []string{"image/jpeg"}, Canonical: "image/jpeg", Ext: ".jpg"},
	{Detected: []string{"image/png"}, Canonical: "image/png", Ext: ".png"},
	{Detected: []string{"image/webp"}, Canonical: "image/webp", Ext: ".webp"},
	{Detected: []string{"image/gif"}, Canonical: "image/gif", Ext: ".gif"},
}}

// Audio: MP3, WAV or M4A, at most 50 MB. M4A is an MPEG-4 audio container:
// mimetype reports audio/x-m4a for the "M4A " brand and audio/mp4 for the
// other audio-only brands; both are reported as audio/mp4 (RFC 4337). An
// MPEG-4 file with a video brand (video/mp4) is refused.
var Audio = &Kind{Name: "audio", MaxBytes: 50 << 20, Types: []Type{
	{Detected: []string{"audio/mpeg"}, Canonical: "audio/mpeg", Ext: ".mp3"},
	{Detected: []string{"audio/wav", "audio/x-wav", "audio/vnd.wave", "audio/wave"}, Canonical: "audio/wav", Ext: ".wav"},
	{Detected: []string{"audio/x-m4a", "audio/mp4"}, Canonical: "audio/mp4", Ext: ".m4a"},
}}

// MaxVideoBytes is the video upload limit: the same 100 MiB cap private
// asset review puts on a reference video, so anything uploaded can be used.
const MaxVideoBytes = 100 << 20

// Video: MP4, MOV (QuickTime) or WebM, at most 100 MB, for video_list and
// video_with_roles. An audio-only MPEG-4 (audio/mp4) is not a video.
var Video = &Kind{Name: "video", MaxBytes: MaxVideoBytes, Types: []Type{
	{Detected: []string{"video/mp4"}, Canonical: "video/mp4", Ext: ".mp4"},
	{Detected: []string{"video/quicktime"}, Canonical: "video/quicktime", Ext: ".mov"},
	{Detected: []string{"video/webm"}, Canonical: "video/webm", Ext: ".webm"},
}, Excluded: []string{"audio/mp4", "audio/x-m4a"}}

// Detect returns the accepted type of a file from its first bytes. A
// subtype counts as its parent (an animated PNG is a PNG).
func (k *Kind) Detect(head []byte) (Type, bool) {
	for m := mimetype.Detect(head); m != nil; m = m.Parent() {
		for _, x := range k.Excluded {
			if m.Is(x) {
				return Type{}, false
			}
		}
		for _, t := range k.Types {
			for _, d := range t.Detected {
				if m.Is(d) {
					return t, true
				}
			}
		}
	}
	return Type{}, false
}

// Putter is where files go; *blob.Store is one. A failed Put must leave no
// object.
type Putter interface {
	Put(ctx context.Context, key, contentType string, r io.Reader) (int64, error)
}

// Object is a stored file.
type Object struct {
	Key      string
	MimeType string
	Size     int64
}

// Save streams r into blobs under keyBase plus the type's extension when
// its first bytes are one of the kind's types and it has at most MaxBytes.
// Only the first SniffLen bytes are buffered: the rest goes straight from r
// to the store. A file over the limit aborts the write (no object is left)
// with ErrTooLarge; an unknown type is ErrUnsupportedType before anything is
// written.
func Save(ctx context.Context, blobs Putter, kind *Kind, keyBase string, r io.Reader) (Object, error) {
	head := make([]byte, SniffLen)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Object{}, fmt.Errorf("%w: %w", ErrRead, err)
	}
	if n == 0 {
		return Object{}, ErrEmpty
	}
	head = head[:n]
	t, ok := kind.Detect(head)
	if !ok {
		return Object{}, fmt.Errorf("%w: %s", ErrUnsupportedType, strings.TrimSpace(mimetype.Detect(head).String()))
	}
	body := &blob.CapReader{R: io.MultiReader(bytes.NewReader(head), r), Left: kind.MaxBytes}
	key := keyBase + t.Ext
	size, err := blobs.Put(ctx, key, t.Canonical, body)
	if err != nil {
		if body.Over {
			return Object{}, ErrTooLarge
		}
		if body.ReadErr != nil {
			return Object{}, fmt.Errorf("%w: %w", ErrRead, body.ReadErr)
		}
		return Object{}, err
	}
	return Object{Key: key, MimeType: t.Canonical, Size: size}, nil
}
