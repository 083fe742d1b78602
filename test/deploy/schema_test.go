package deploy

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestValuesSchemaRejectsWrongValues: values.schema.json stops a wrong value
// at install time with the path of the value and what was expected.
func TestValuesSchemaRejectsWrongValues(t *testing.T) {
	needTool(t, "helm", helmBin)
	cases := []struct {
		name string
		set  []string
		want []string
	}{
		{"a string where an integer belongs", []string{"--set-string", "gateway.replicas=two"},
			[]string{"values don't meet the specifications of the schema", "/gateway/replicas", "want integer"}},
		{"a misspelt key", []string{"--set", "gateway.replica=3"},
			[]string{"/gateway", "additional properties 'replica' not allowed"}},
		{"a value outside an enum", []string{"--set", "gateway.balanceUnit=eur"},
			[]string{"/gateway/balanceUnit", "usd"}},
		{"an empty database Secret", []string{"--set", "database.existingSecret="},
			[]string{"/database/existingSecret", "minLength"}},
		{"a port out of range", []string{"--set", "gateway.port=70000"},
			[]string{"/gateway/port", "maximum"}},
		{"an OTLP protocol the binaries do not speak", []string{"--set", "tracing.protocol=http/json"},
			[]string{"/tracing/protocol", "grpc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, verb := range [][]string{
				{"template", "modelgate", "charts/modelgate"},
				{"lint", "charts/modelgate"},
			} {
				out, err := runTool(helmBin, append(verb, tc.set...)...)
				g.Expect(err).To(HaveOccurred(), "helm %s accepted %v", verb[0], tc.set)
				msg := err.Error() + string(out)
				for _, w := range tc.want {
					g.Expect(msg).To(ContainSubstring(w), "helm %s %v", verb[0], tc.set)
				}
				if verb[0] == "template" && strings.Contains(tc.name, "integer") {
					t.Logf("helm template %v says:\n%s", tc.set, msg)
				}
			}
		})
	}
}
