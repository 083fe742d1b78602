package builtin

import (
	"slices"
	"testing"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// Names is what Known answers from, without building adapters: it must
// list exactly the adapters Registry builds, or the ModelRoute controller
// would accept a route no replica can serve (or refuse one it can).
func TestNamesListRegistry(t *testing.T) {
	got := Names()
	slices.Sort(got)
	want := Registry(upstream.Egress{}).Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, Registry has %v", got, want)
	}
	for _, n := range want {
		if !Known(n) {
			t.Errorf("Known(%q) = false", n)
		}
	}
	if Known("no-such-provider") {
		t.Error("Known accepts an unknown provider")
	}
}
