package media

import (
	"encoding/json"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/api/v1alpha1"
)

// reject is one request that must be refused.
type reject struct {
	name  string
	body  string
	opts  Options
	param string // expected Param ("-" to skip the check)
	msg   string // substring of the message
}

func runRejects(t *testing.T, profile v1alpha1.ValidationProfile, cases []reject) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, err := Validate(profile, []byte(tc.body), tc.opts)
			g.Expect(n).To(BeNil())
			g.Expect(err).NotTo(BeNil(), "body %s was accepted", tc.body)
			g.Expect(err.Status).To(Equal(http.StatusBadRequest))
			g.Expect(err.Type).To(Equal("invalid_request"))
			g.Expect(err.Message).To(ContainSubstring(tc.msg))
			if tc.param != "-" {
				g.Expect(err.Param).To(Equal(tc.param))
			}
		})
	}
}

// accept validates body and returns the result plus its request decoded back
// from RequestJSON (numbers as float64).
func accept(t *testing.T, profile v1alpha1.ValidationProfile, body string, opts Options) (*Normalized, map[string]any) {
	t.Helper()
	g := NewWithT(t)
	n, err := Validate(profile, []byte(body), opts)
	g.Expect(err).To(BeNil(), "body %s was rejected: %v", body, err)
	g.Expect(n).NotTo(BeNil())
	g.Expect(n.Profile).To(Equal(profile))
	raw, jerr := n.RequestJSON()
	g.Expect(jerr).NotTo(HaveOccurred())
	var m map[string]any
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	return n, m
}

// commonBodyRejects apply to every family.
func commonBodyRejects() []reject {
	return []reject{
		{name: "empty body", body: ``, param: "", msg: "request body is empty"},
		{name: "blank body", body: "  \n", param: "", msg: "request body is empty"},
		{name: "invalid json", body: `{"prompt":`, param: "", msg: "not valid JSON"},
		{name: "array body", body: `[1,2]`, param: "", msg: "must be a JSON object"},
		{name: "null body", body: `null`, param: "", msg: "must be a JSON object"},
		{name: "two objects", body: `{"prompt":"a"} {"prompt":"b"}`, param: "", msg: "exactly one JSON object"},
		{name: "invalid utf8", body: "{\"prompt\":\"\xff\"}", param: "", msg: "UTF-8"},
		{name: "model not a string", body: `{"model":1,"prompt":"x"}`, param: "model", msg: "model must be a string"},
	}
}

func TestUnknownProfile(t *testing.T) {
	g := NewWithT(t)
	n, err := Validate("text", []byte(`{"prompt":"x"}`), Options{})
	g.Expect(n).To(BeNil())
	g.Expect(err.Status).To(Equal(http.StatusInternalServerError))
	g.Expect(err.Type).To(Equal("internal_error"))
	_, err = Validate("", []byte(`{"prompt":"x"}`), Options{})
	g.Expect(err.Type).To(Equal("internal_error"))
}

func TestValidationErrorString(t *testing.T) {
	g := NewWithT(t)
	e := invalid("n", "n must be between 1 and %d", 15)
	g.Expect(e.Error()).To(Equal("400 invalid_request: n must be between 1 and 15"))
	var nilErr *ValidationError
	g.Expect(nilErr.Error()).To(Equal("<nil>"))
}
