package media

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseBody decodes a request body into a JSON object, keeping numbers as
// json.Number so that integers are checked exactly.
func parseBody(body []byte) (map[string]any, *ValidationError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, invalid("", "request body is empty; a JSON object is required")
	}
	if !utf8.Valid(body) {
		return nil, invalid("", "request body must be UTF-8 encoded JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid("", "request body is not valid JSON: %s", jsonErrText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("", "request body must contain exactly one JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("", "request body must be a JSON object")
	}
	return m, nil
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// fields reads typed values out of one JSON object. prefix is the JSON path
// of the object ("" for the body, "metadata" for the metadata object, …).
// A field holding JSON null is treated as absent.
type fields struct {
	m      map[string]any
	prefix string
}

func (f fields) path(key string) string {
	if f.prefix == "" {
		return key
	}
	return f.prefix + "." + key
}

// get returns the raw value and whether it is present (and not null).
func (f fields) get(key string) (any, bool) {
	if f.m == nil {
		return nil, false
	}
	v, ok := f.m[key]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// has reports whether key is present, even with a null value.
func (f fields) has(key string) bool {
	if f.m == nil {
		return false
	}
	_, ok := f.m[key]
	return ok
}

func (f fields) str(key string) (string, bool, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, invalid(f.path(key), "%s must be a string", f.path(key))
	}
	return s, true, nil
}

func (f fields) boolean(key string, def bool) (bool, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return def, invalid(f.path(key), "%s must be a boolean (true or false)", f.path(key))
	}
	return b, nil
}

// integer reads a JSON number holding an integer. A string ("2") is rejected:
// the contract requires JSON numbers. Integral values written with a fraction
// or exponent (2.0, 1e1) are accepted.
func (f fields) integer(key string) (int64, bool, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return 0, false, nil
	}
	n, err := toInteger(v, f.path(key))
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}

func toInteger(v any, path string) (int64, *ValidationError) {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			return i, nil
		}
		fl, err := strconv.ParseFloat(t.String(), 64)
		if err != nil || math.IsInf(fl, 0) || math.IsNaN(fl) || fl != math.Trunc(fl) ||
			fl < math.MinInt64 || fl >= math.MaxInt64 {
			return 0, invalid(path, "%s must be an integer (got %s)", path, clip(t.String()))
		}
		return int64(fl), nil
	case string:
		return 0, invalid(path, "%s must be a JSON number, not a string", path)
	default:
		return 0, invalid(path, "%s must be an integer", path)
	}
}

// number reads any finite JSON number.
func (f fields) number(key string) (float64, bool, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return 0, false, nil
	}
	switch t := v.(type) {
	case json.Number:
		fl, err := strconv.ParseFloat(t.String(), 64)
		if err != nil || math.IsInf(fl, 0) || math.IsNaN(fl) {
			return 0, false, invalid(f.path(key), "%s must be a number", f.path(key))
		}
		return fl, true, nil
	case string:
		return 0, false, invalid(f.path(key), "%s must be a JSON number, not a string", f.path(key))
	default:
		return 0, false, invalid(f.path(key), "%s must be a number", f.path(key))
	}
}

func (f fields) object(key string) (fields, bool, *ValidationError) {
	sub := fields{prefix: f.path(key)}
	v, ok := f.get(key)
	if !ok {
		return sub, false, nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return sub, false, invalid(f.path(key), "%s must be an object", f.path(key))
	}
	sub.m = m
	return sub, true, nil
}

func (f fields) array(key string) ([]any, bool, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return nil, false, nil
	}
	a, isArr := v.([]any)
	if !isArr {
		return nil, false, invalid(f.path(key), "%s must be an array", f.path(key))
	}
	return a, true, nil
}

// objectArray reads an array of objects; each element is returned as fields
// with the path key[i].
func (f fields) objectArray(key string) ([]fields, *ValidationError) {
	a, ok, err := f.array(key)
	if err != nil || !ok {
		return nil, err
	}
	out := make([]fields, 0, len(a))
	for i, e := range a {
		p := f.path(key) + "[" + strconv.Itoa(i) + "]"
		m, isObj := e.(map[string]any)
		if !isObj {
			return nil, invalid(p, "%s must be an object", p)
		}
		out = append(out, fields{m: m, prefix: p})
	}
	return out, nil
}

// stringArray reads an array of strings.
func (f fields) stringArray(key string) ([]string, *ValidationError) {
	v, ok := f.get(key)
	if !ok {
		return nil, nil
	}
	a, isArr := v.([]any)
	if !isArr {
		return nil, invalid(f.path(key), "%s must be an array of URL strings", f.path(key))
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, isStr := e.(string)
		if !isStr {
			p := f.path(key) + "[" + strconv.Itoa(i) + "]"
			return nil, invalid(p, "%s must be a string", p)
		}
		out = append(out, s)
	}
	return out, nil
}

// enum reads a string restricted to allowed values. Matching ignores case and
// surrounding spaces; the canonical spelling from allowed is returned. def is
// returned when the field is absent.
func (f fields) enum(key string, allowed []string, def string) (string, *ValidationError) {
	s, ok, err := f.str(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return def, nil
	}
	if c, found := canonical(s, allowed); found {
		return c, nil
	}
	return "", invalid(f.path(key), "%s must be one of %s (got %q)", f.path(key), strings.Join(allowed, ", "), clip(s))
}

func canonical(s string, allowed []string) (string, bool) {
	t := strings.TrimSpace(s)
	for _, a := range allowed {
		if strings.EqualFold(t, a) {
			return a, true
		}
	}
	return "", false
}

// clip shortens a caller-supplied value quoted in an error message.
func clip(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

// prompt reads a required, non-blank prompt of at most maxRunes characters
// (0 = no limit).
func (f fields) requiredPrompt(maxRunes int) (string, *ValidationError) {
	p, ok, err := f.str("prompt")
	if err != nil {
		return "", err
	}
	if !ok || strings.TrimSpace(p) == "" {
		return "", invalid("prompt", "prompt is required and must not be empty")
	}
	if maxRunes > 0 {
		if n := utf8.RuneCountInString(p); n > maxRunes {
			return "", invalid("prompt", "prompt must be at most %d characters (got %d)", maxRunes, n)
		}
	}
	return p, nil
}

// model copies the model field when present; routing already used it.
func (f fields) model(req map[string]any) (string, *ValidationError) {
	m, ok, err := f.str("model")
	if err != nil {
		return "", err
	}
	if ok {
		req["model"] = m
	}
	return m, nil
}

// MaxClientBusinessIDLength is the longest accepted client_business_id, in
// characters.
const MaxClientBusinessIDLength = 128

// clientBusinessID reads the caller's business identifier. An empty string
// is treated as absent.
func (f fields) clientBusinessID() (string, *ValidationError) {
	const key = "client_business_id"
	s, ok, err := f.str(key)
	if err != nil || !ok {
		return "", err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	if n := utf8.RuneCountInString(s); n > MaxClientBusinessIDLength {
		return "", invalid(key, "client_business_id must be at most %d characters (got %d)", MaxClientBusinessIDLength, n)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", invalid(key, "client_business_id must not contain control characters")
		}
	}
	return s, nil
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }
