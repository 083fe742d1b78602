package media

import (
	"net/url"
	"strings"
)

// MaxURLBytes is the longest accepted media URL, in UTF-8 bytes (after
// trimming surrounding spaces).
const MaxURLBytes = 2048

// checkURL validates one media URL at path and returns it trimmed. http and
// https URLs with a host are accepted; asset:// references only when
// allowAsset is set. base64 data and data: URIs are rejected with a message
// telling the caller to upload first.
func checkURL(path, raw string, allowAsset bool) (string, *ValidationError) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", invalid(path, "%s must not be empty", path)
	}
	if hasPrefixFold(s, "data:") || looksLikeBase64(s) {
		return "", invalid(path, "%s: base64 data and data URIs are not accepted; upload the file first (for images POST /v1/uploads/images) and pass the returned URL", path)
	}
	if n := len(s); n > MaxURLBytes {
		return "", invalid(path, "%s must be at most %d bytes (got %d)", path, MaxURLBytes, n)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", invalid(path, "%s is not a valid URL", path)
	}
	scheme := strings.ToLower(u.Scheme)
	if len(scheme) == 1 { // a Windows drive letter: C:\img.png
		scheme = "file"
	}
	switch scheme {
	case "http", "https":
		if u.Host == "" || u.Hostname() == "" {
			return "", invalid(path, "%s must be an http or https URL with a host", path)
		}
		return s, nil
	case "asset":
		if !allowAsset {
			return "", invalid(path, "%s must be an http or https URL; asset:// references are not accepted here", path)
		}
		if u.Host == "" && strings.Trim(u.Opaque+u.Path, "/") == "" {
			return "", invalid(path, "%s: asset:// reference is empty", path)
		}
		return s, nil
	case "", "file":
		return "", invalid(path, "%s must be a public http or https URL; local files are not accepted, upload the file first", path)
	default:
		return "", invalid(path, "%s must be an http or https URL (got scheme %q)", path, clip(u.Scheme))
	}
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isAssetRef(s string) bool { return hasPrefixFold(strings.TrimSpace(s), "asset://") }

// looksLikeBase64 reports whether s is raw base64 data rather than a URL or
// path: long, no scheme separator, only base64 alphabet characters.
func looksLikeBase64(s string) bool {
	if len(s) < 32 || strings.Contains(s, "://") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '+' || c == '/' || c == '=' || c == '-' || c == '_':
		case c == '\n' || c == '\r':
		default:
			return false
		}
	}
	return true
}

// hasCredentials reports whether an http(s) URL embeds user information.
func hasCredentials(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.User != nil
}

// imageURLs reads an array of reference image URLs (http/https only) with at
// most max entries.
func (f fields) imageURLs(key string, max int) ([]string, *ValidationError) {
	list, err := f.stringArray(key)
	if err != nil {
		return nil, err
	}
	if len(list) > max {
		return nil, invalid(f.path(key), "%s must contain at most %d image URLs (got %d)", f.path(key), max, len(list))
	}
	out := make([]string, 0, len(list))
	for i, raw := range list {
		u, err := checkURL(indexPath(f.path(key), i), raw, false)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
