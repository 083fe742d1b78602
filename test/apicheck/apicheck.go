package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/modelgate/modelgate/gateway/http/openapi"
)

// Checker validates responses against the document.
type Checker struct {
	doc *openapi3.T
	// mux routes a request as the gateway's mux does: the document's paths
	// as http.ServeMux patterns (x-servemux where the two spell a path
	// differently, such as a wildcard that spans slashes).
	mux      *http.ServeMux
	patterns []string
	families []family
	fallback *openapi3.SchemaRef
}

// family is an x-unmatched entry: the error shape of unmatched paths under
// its prefixes.
type family struct {
	prefixes []string
	schema   *openapi3.SchemaRef
}

// routeKey carries the matched route out of the mux.
type routeKey struct{}

type match struct {
	route  *routers.Route
	params map[string]string
}

// JSONL bodies (Anthropic's batch results, application/x-jsonl) are not
// among kin-openapi's decoders: each line must be a JSON value, and the
// body is then checked as the string the document declares.
func init() {
	openapi3filter.RegisterBodyDecoder("application/x-jsonl", decodeJSONL)
}

func decodeJSONL(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 && !json.Valid(line) {
			return nil, fmt.Errorf("JSONL line %d is not JSON: %.80q", i+1, line)
		}
	}
	return string(data), nil
}

// Load reads and validates the document (OpenAPI 3.1, JSON Schema 2020-12)
// and builds the router.
func Load() (*Checker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML())
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	c := &Checker{doc: doc, mux: http.NewServeMux()}
	for path, item := range doc.Paths.Map() {
		muxPath := path
		if p, ok := item.Extensions["x-servemux"].(string); ok {
			muxPath = p
		}
		for method, op := range item.Operations() {
			route := &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
			var names []string
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
					names = append(names, p.Value.Name)
				}
			}
			pattern := method + " " + muxPath
			c.patterns = append(c.patterns, pattern)
			c.mux.Handle(pattern, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				m := r.Context().Value(routeKey{}).(*match)
				m.route, m.params = route, map[string]string{}
				for _, n := range names {
					m.params[n] = r.PathValue(n) // "" under a subtree pattern such as /files/
				}
			}))
		}
	}
	sort.Strings(c.patterns)
	if err := c.loadUnmatched(); err != nil {
		return nil, err
	}
	return c, nil
}

// Patterns are the document's operations as http.ServeMux patterns, sorted.
func (c *Checker) Patterns() []string { return append([]string(nil), c.patterns...) }

// Doc is the loaded document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

func (c *Checker) loadUnmatched() error {
	raw, ok := c.doc.Extensions["x-unmatched"]
	if !ok {
		return errors.New("the document has no x-unmatched")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	var u struct {
		Families []struct {
			Prefixes []string `json:"prefixes"`
			Schema   struct {
				Ref string `json:"$ref"`
			} `json:"schema"`
		} `json:"families"`
		Default struct {
			Schema struct {
				Ref string `json:"$ref"`
			} `json:"schema"`
		} `json:"default"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return fmt.Errorf("x-unmatched: %w", err)
	}
	for _, f := range u.Families {
		s, err := c.schema(f.Schema.Ref)
		if err != nil {
			return err
		}
		c.families = append(c.families, family{f.Prefixes, s})
	}
	c.fallback, err = c.schema(u.Default.Schema.Ref)
	return err
}

func (c *Checker) schema(ref string) (*openapi3.SchemaRef, error) {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	s := c.doc.Components.Schemas[name]
	if !ok || s == nil {
		return nil, fmt.Errorf("x-unmatched: no schema %q", ref)
	}
	return s, nil
}

// route finds the documented operation of a request; nil when none.
func (c *Checker) route(req *http.Request) *match {
	m := &match{}
	probe := req.Clone(context.WithValue(context.Background(), routeKey{}, m))
	probe.Body = http.NoBody
	c.mux.ServeHTTP(httptest.NewRecorder(), probe)
	if m.route == nil {
		return nil
	}
	return m
}

// Streaming reports whether a response is an event stream: its body is
// not read whole (CheckStream checks what a stream can be checked for).
func Streaming(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// Check validates a whole response: its status is declared for the
// operation (or, for a request no operation matches, is the unmatched
// 404 or 405 in its family's shape), its content type is declared for that
// status, and its body validates against the declared schema.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	m := c.route(req)
	if m == nil {
		return c.checkUnmatched(req, status, header, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: m.params, Route: m.route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// CheckStream validates an event stream's status and content type. It
// returns the schema each event's data must validate against (the media
// type's x-event-schema), nil when the document gives none.
func (c *Checker) CheckStream(req *http.Request, status int, header http.Header) (*openapi3.Schema, error) {
	m := c.route(req)
	if m == nil {
		return nil, fmt.Errorf("%s %s: an event stream from an undocumented path", req.Method, req.URL.Path)
	}
	resp := m.route.Operation.Responses.Status(status)
	if resp == nil {
		resp = m.route.Operation.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return nil, fmt.Errorf("%s %s: status %d is not declared", req.Method, m.route.Path, status)
	}
	mt := resp.Value.Content.Get(header.Get("Content-Type"))
	if mt == nil {
		return nil, fmt.Errorf("%s %s: status %d does not declare %q", req.Method, m.route.Path, status, header.Get("Content-Type"))
	}
	ref, ok := mt.Extensions["x-event-schema"].(map[string]any)
	if !ok {
		return nil, nil
	}
	r, _ := ref["$ref"].(string)
	s, err := c.schema(r)
	if err != nil {
		return nil, err
	}
	return s.Value, nil
}

// CheckEvents validates the data of each whole event of a stream's bytes
// (an event cut off at the end is not checked) against schema. An event
// whose data is not JSON ([DONE]) is not checked either.
func CheckEvents(schema *openapi3.Schema, stream []byte) error {
	stream = bytes.ReplaceAll(stream, []byte("\r\n"), []byte("\n"))
	events := bytes.Split(stream, []byte("\n\n"))
	for i, ev := range events[:len(events)-1] {
		var data []byte
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
		}
		var v any
		if len(data) == 0 || json.Unmarshal(data, &v) != nil {
			continue
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			return fmt.Errorf("event %d (%s): %w", i, data, err)
		}
	}
	return nil
}

func (c *Checker) checkUnmatched(req *http.Request, status int, header http.Header, body []byte) error {
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return fmt.Errorf("%s %s: no documented operation, and the answer is %d (not the unmatched 404 or 405)",
			req.Method, req.URL.Path, status)
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("%s %s: unmatched %d answered as %q, not JSON", req.Method, req.URL.Path, status, header.Get("Content-Type"))
	}
	schema := c.fallback
	best := -1
	for _, f := range c.families {
		for _, p := range f.prefixes {
			if (req.URL.Path == p || strings.HasPrefix(req.URL.Path, p+"/")) && len(p) > best {
				schema, best = f.schema, len(p)
			}
		}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%s %s: unmatched %d body is not JSON: %w", req.Method, req.URL.Path, status, err)
	}
	if err := schema.Value.VisitJSON(jsonValue(v), openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s %s: unmatched %d body: %w", req.Method, req.URL.Path, status, err)
	}
	return nil
}

// jsonValue turns json.Number into float64 as VisitJSON expects.
func jsonValue(v any) any {
	switch t := v.(type) {
	case json.Number:
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = jsonValue(e)
		}
	case []any:
		for i, e := range t {
			t[i] = jsonValue(e)
		}
	}
	return v
}
