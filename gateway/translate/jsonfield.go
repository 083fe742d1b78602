package translate

import (
	"errors"
	"unicode/utf8"
)

// This file reads and patches single fields of a JSON document without
// decoding it, so pass-through bodies keep every other byte as the client or
// upstream sent it.

var errNotObject = errors.New("translate: JSON value is not an object")

// FieldRaw returns the raw bytes of the value at the object path keys (for
// example FieldRaw(b, "message", "model")). It returns false when a key is
// missing or an intermediate value is not an object. The result aliases data.
func FieldRaw(data []byte, keys ...string) ([]byte, bool) {
	s, e, ok := fieldSpan(data, keys)
	if !ok {
		return nil, false
	}
	return data[s:e], true
}

// FieldString returns the string value at the path, unescaped.
func FieldString(data []byte, keys ...string) (string, bool) {
	raw, ok := FieldRaw(data, keys...)
	if !ok || len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw)
}

// SetField returns data with the value at the path replaced by raw (a JSON
// value). When the last key is missing from its object it is added as the
// object's first member. Intermediate objects must exist. Every other byte is
// kept.
func SetField(data []byte, raw []byte, keys ...string) ([]byte, error) {
	if len(keys) == 0 {
		return nil, errors.New("translate: SetField needs a key")
	}
	s, e, ok := fieldSpan(data, keys)
	if ok {
		out := make([]byte, 0, len(data)-(e-s)+len(raw))
		out = append(out, data[:s]...)
		out = append(out, raw...)
		return append(out, data[e:]...), nil
	}
	// Find the enclosing object and insert.
	os, oe := 0, len(data)
	if len(keys) > 1 {
		var found bool
		os, oe, found = fieldSpan(data, keys[:len(keys)-1])
		if !found {
			return nil, errors.New("translate: SetField: parent object missing")
		}
	}
	i := skipWS(data, os)
	if i >= oe || data[i] != '{' {
		return nil, errNotObject
	}
	j := skipWS(data, i+1)
	key := keys[len(keys)-1]
	out := make([]byte, 0, len(data)+len(key)+len(raw)+4)
	out = append(out, data[:i+1]...)
	out = appendJSONString(out, key)
	out = append(out, ':')
	out = append(out, raw...)
	if j < len(data) && data[j] != '}' {
		out = append(out, ',')
	}
	return append(out, data[i+1:]...), nil
}

// SetString is SetField with a string value.
func SetString(data []byte, value string, keys ...string) ([]byte, error) {
	var stack [128]byte
	return SetField(data, appendJSONString(stack[:0], value), keys...)
}

func fieldSpan(data []byte, keys []string) (int, int, bool) {
	start, end := skipWS(data, 0), len(data)
	for _, k := range keys {
		s, e, ok := objectMember(data[:end], start, k)
		if !ok {
			return 0, 0, false
		}
		start, end = s, e
	}
	return start, end, true
}

// objectMember finds key in the object starting at data[i] and returns the
// span of its value.
func objectMember(data []byte, i int, key string) (int, int, bool) {
	vs, ve, found := 0, 0, false
	members(data, i, func(ks, ke, s, e int) bool {
		if keyEqual(data[ks:ke], key) {
			vs, ve, found = s, e, true
			return false
		}
		return true
	})
	return vs, ve, found
}

// members calls fn with the spans of each key (quoted) and value of the
// object starting at data[i], in order, until fn returns false. It reports
// false when the object is malformed before fn stopped it.
func members(data []byte, i int, fn func(ks, ke, vs, ve int) bool) bool {
	i = skipWS(data, i)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = skipWS(data, i)
		if i < len(data) && data[i] == '}' {
			return true
		}
		if i >= len(data) || data[i] != '"' {
			return false
		}
		ke, ok := skipString(data, i)
		if !ok {
			return false
		}
		ks := i
		i = skipWS(data, ke)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		vs := skipWS(data, i+1)
		ve, ok := skipValue(data, vs)
		if !ok {
			return false
		}
		if !fn(ks, ke, vs, ve) {
			return true
		}
		i = skipWS(data, ve)
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
}

// Members calls fn with each member of the JSON object in data (the key
// still quoted, see KeyIs; both alias data) until fn returns false. It
// reports false when data is not an object. It checks structure only as
// far as it walks: validate the document first (json.Valid).
func Members(data []byte, fn func(key, value []byte) bool) bool {
	return members(data, 0, func(ks, ke, vs, ve int) bool { return fn(data[ks:ke], data[vs:ve]) })
}

// Elements calls fn with each element of the JSON array in data (aliasing
// data) until fn returns false. It reports false when data is not an array.
func Elements(data []byte, fn func(value []byte) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i++
	for {
		i = skipWS(data, i)
		if i < len(data) && data[i] == ']' {
			return true
		}
		e, ok := skipValue(data, i)
		if !ok {
			return false
		}
		if !fn(data[i:e]) {
			return true
		}
		i = skipWS(data, e)
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
}

// KeyIs reports whether a quoted member key (from Members) is name, with
// its escapes decoded, as encoding/json compares map keys.
func KeyIs(quoted []byte, name string) bool { return keyEqual(quoted, name) }

func keyEqual(quoted []byte, key string) bool {
	inner := quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c == '\\' {
			s, ok := unquote(quoted)
			return ok && s == key
		}
	}
	return string(inner) == key
}

func skipWS(data []byte, i int) int {
	for i < len(data) && isWS(data[i]) {
		i++
	}
	return i
}

// isWS reports JSON whitespace.
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipString returns the index just past the string starting at data[i].
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the JSON value starting at data[i].
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e, ok := skipString(data, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// unquote decodes a JSON string literal.
func unquote(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	inner := q[1 : len(q)-1]
	simple := true
	for _, c := range inner {
		if c == '\\' {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if err := jsonUnmarshal(q, &s); err != nil {
		return "", false
	}
	return s, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
