package upstream

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

type anyReviewer struct{}

func (anyReviewer) Decide(context.Context, Backend, ReviewAsset, time.Time) (ReviewDecision, error) {
	return ReviewDecision{}, nil
}

// groupReviewer reviews only backends of its own provider with a group.
type groupReviewer struct{ anyReviewer }

func (groupReviewer) ReviewsBackend(b Backend) bool {
	return b.Provider == "lib" && b.Options["group"] != ""
}

func TestAssetLibrary(t *testing.T) {
	g := NewWithT(t)
	r := NewRegistry(Entry{Name: "sim", Adapter: anyReviewer{}}, Entry{Name: "lib", Adapter: groupReviewer{}})
	lib := func(provider string, opts map[string]string) (AssetReviewer, error) {
		return r.AssetLibrary(Backend{Name: "b", Provider: provider, Options: opts})
	}

	rv, err := lib("sim", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rv).To(Equal(anyReviewer{}), "a provider that is a reviewer reviews its own channels")
	rv, err = lib("other", map[string]string{OptionAssetLibrary: "sim"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rv).To(Equal(anyReviewer{}), "named explicitly")
	rv, err = lib("lib", map[string]string{"group": "g1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rv).To(Equal(groupReviewer{}))

	for _, none := range []struct {
		provider string
		opts     map[string]string
	}{
		{"other", nil}, // not a reviewer
		{"sim", map[string]string{OptionAssetLibrary: "none"}}, // turned off
		{"lib", nil}, // not configured: skipped without an error
	} {
		rv, err = lib(none.provider, none.opts)
		g.Expect(err).NotTo(HaveOccurred(), none.provider)
		g.Expect(rv).To(BeNil(), none.provider)
	}

	_, err = lib("sim", map[string]string{OptionAssetLibrary: "simm"})
	g.Expect(err).To(MatchError(`options.assetLibrary "simm" names no asset library of this gateway (lib, sim, or none)`))
	rv, err = lib("other", map[string]string{OptionAssetLibrary: "lib", "group": "g1"})
	g.Expect(rv).To(BeNil())
	g.Expect(err).To(MatchError(ContainSubstring(`asset library "lib" cannot review this backend (provider "other"`)))
}
