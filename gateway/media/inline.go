package media

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// ReviewInlineImageMaxBytes is the on-demand storage limit of one decoded
// inline image under private asset review: images up to 20 MiB.
const ReviewInlineImageMaxBytes = 20 << 20

// InlineKeyPrefix starts the key of an inline image: "sha256:" and the hex
// SHA-256 of its decoded content. The key stands in for the data in the
// normalized request until the gateway stores the data.
const InlineKeyPrefix = "sha256:"

// inlineImageTypes are the image types accepted inline, with their extension.
var inlineImageTypes = map[string]string{
	"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif", "image/bmp": "bmp",
}

// isInline reports whether an image value is inline data: a data URI or raw base64.
func isInline(s string) bool {
	s = strings.TrimSpace(s)
	return hasPrefixFold(s, "data:") || looksLikeBase64(s)
}

// decodeInlineImage decodes and validates an inline image: under private
// asset review an image may be raw base64 or a data:image/...;base64 URI,
// which is decoded, validated and stored.
func decodeInlineImage(path, raw string) (mediaRef, *ValidationError) {
	s := strings.TrimSpace(raw)
	payload := s
	if hasPrefixFold(s, "data:") {
		meta, data, ok := strings.Cut(s[len("data:"):], ",")
		if !ok || !strings.HasSuffix(strings.ToLower(meta), ";base64") || !strings.HasPrefix(strings.ToLower(meta), "image/") {
			return mediaRef{}, invalid(path, "%s: a data URI must have the form data:image/<type>;base64,<data>", path)
		}
		payload = data
	}
	payload = strings.NewReplacer("\n", "", "\r", "").Replace(payload)
	if base64.StdEncoding.DecodedLen(len(payload)) > ReviewInlineImageMaxBytes+3 {
		return mediaRef{}, invalid(path, "%s: an inline image must be at most 20 MiB once decoded", path)
	}
	data, err := decodeBase64(payload)
	if err != nil {
		return mediaRef{}, invalid(path, "%s is not valid base64 image data", path)
	}
	if len(data) == 0 {
		return mediaRef{}, invalid(path, "%s: the inline image is empty", path)
	}
	if len(data) > ReviewInlineImageMaxBytes {
		return mediaRef{}, invalid(path, "%s: an inline image must be at most 20 MiB once decoded (got %d bytes)", path, len(data))
	}
	mt := mimetype.Detect(data).String()
	if _, ok := inlineImageTypes[mt]; !ok {
		return mediaRef{}, invalid(path, "%s: the inline data is not a PNG, JPEG, WebP, GIF or BMP image", path)
	}
	sum := sha256.Sum256(data)
	return mediaRef{path: path, url: InlineKeyPrefix + hex.EncodeToString(sum[:]), data: data, mime: mt}, nil
}

// decodeBase64 accepts standard and URL-safe alphabets, padded or not.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, base64.CorruptInputError(0)
}

// InlineExtension is the file extension of an inline image's MIME type.
func InlineExtension(mime string) string { return inlineImageTypes[mime] }
