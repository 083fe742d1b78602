package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// ReviewAsset is one prepared private asset a reviewer decides.
type ReviewAsset struct {
	// Type is the asset's kind ("image", "video", "audio").
	Type string
	// Key is the asset's URL, or "sha256:<hex>" of inline content.
	Key string
	// PreparedAt is when the asset's current preparation started.
	PreparedAt time.Time
	// CopyURL is a signed link to the asset's reviewed copy in the
	// gateway's blob store ("" without one): what a library that fetches
	// the asset itself is given, never the tenant's URL.
	CopyURL string
	// Ref is the upstream reference an earlier Decide returned for this
	// preparation ("" before the first).
	Ref string
}

// Review decisions (the ledger's review states).
const (
	ReviewPending  = "pending"
	ReviewPassed   = "passed"
	ReviewRejected = "rejected"
)

// ReviewDecision is where a reviewer has got with one asset.
type ReviewDecision struct {
	// State is ReviewPassed, ReviewRejected or ReviewPending.
	State string
	// Wait is how long to wait before asking again while pending.
	Wait time.Duration
	// Ref is the channel's own reference of the asset (Ark's
	// "asset://<id>"), recorded with the preparation and sent upstream in
	// place of the copy once the asset passed; "" keeps the one recorded.
	Ref string
}

// AssetReviewer is a channel's private asset review: it decides one
// prepared asset. b carries the backend's credential. An error is the
// review service's or the platform's fault: the asset stays pending and
// is asked about again, until the round's deadline.
type AssetReviewer interface {
	Decide(ctx context.Context, b Backend, a ReviewAsset, now time.Time) (ReviewDecision, error)
}

// BackendReviewer is an AssetReviewer that has a library only on backends
// configured for it (Ark: an asset group); other backends of its provider
// skip review, as channels without a private asset library do.
type BackendReviewer interface {
	ReviewsBackend(b Backend) bool
}

// Entry names one adapter. An adapter has one or more capabilities,
// found by type assertion: TextProvider, TaskAdapter (and Canceler),
// AssetReviewer, Embedder.
type Entry struct {
	Name    string
	Adapter any
}

// Registry is the set of compiled-in adapters by provider name. It is
// built once and never changes, so lookups on the request path take no lock.
type Registry struct {
	names     []string
	text      map[string]TextProvider
	tasks     map[string]TaskAdapter
	reviewers map[string]AssetReviewer
	embedders map[string]Embedder
}

// NewRegistry indexes entries by capability. It panics on a duplicate name
// or an adapter with no capability: the list is a compile-time constant of
// the program (see package builtin).
func NewRegistry(entries ...Entry) *Registry {
	r := &Registry{text: map[string]TextProvider{}, tasks: map[string]TaskAdapter{}, reviewers: map[string]AssetReviewer{}, embedders: map[string]Embedder{}}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.Name] {
			panic("upstream: adapter registered twice: " + e.Name)
		}
		seen[e.Name] = true
		found := false
		if p, ok := e.Adapter.(TextProvider); ok {
			r.text[e.Name], found = p, true
		}
		if a, ok := e.Adapter.(TaskAdapter); ok {
			r.tasks[e.Name], found = a, true
		}
		if a, ok := e.Adapter.(AssetReviewer); ok {
			r.reviewers[e.Name], found = a, true
		}
		if a, ok := e.Adapter.(Embedder); ok {
			r.embedders[e.Name], found = a, true
		}
		if !found {
			panic(fmt.Sprintf("upstream: adapter %s (%T) has no capability", e.Name, e.Adapter))
		}
		r.names = append(r.names, e.Name)
	}
	sort.Strings(r.names)
	return r
}

// Text returns the text provider registered under name.
func (r *Registry) Text(name string) (TextProvider, bool) {
	p, ok := r.text[name]
	return p, ok
}

// Task returns the task adapter registered under name.
func (r *Registry) Task(name string) (TaskAdapter, bool) {
	a, ok := r.tasks[name]
	return a, ok
}

// Reviewer returns the asset reviewer registered under name.
func (r *Registry) Reviewer(name string) (AssetReviewer, bool) {
	a, ok := r.reviewers[name]
	return a, ok
}

// Embedder returns the embeddings adapter registered under name.
func (r *Registry) Embedder(name string) (Embedder, bool) {
	a, ok := r.embedders[name]
	return a, ok
}

// Known reports whether any adapter is registered under name; the
// ModelRoute controller refuses backends of any other provider.
func (r *Registry) Known(name string) bool {
	_, t := r.text[name]
	_, k := r.tasks[name]
	_, e := r.embedders[name]
	return t || k || e
}

// Names lists the registered adapters, sorted.
func (r *Registry) Names() []string { return append([]string(nil), r.names...) }

// OptionAssetLibrary is the backend option that names the asset library
// reviewing a channel's private assets, or "none".
const OptionAssetLibrary = "assetLibrary"

// AssetLibrary returns the asset reviewer of backend b, or nil when its
// channel has no private asset library. Option OptionAssetLibrary names a
// registered reviewer, or "none"; without it, a provider that is itself a
// reviewer (the simulated one, Ark) reviews its own channels and any other
// has none. A reviewer that needs configuration (BackendReviewer) reviews
// only the backends it accepts. The error says why a library the option
// names explicitly cannot serve b (no reviewer of that name, or one that
// does not review b); the reviewer is then nil too.
func (r *Registry) AssetLibrary(b Backend) (AssetReviewer, error) {
	lib, explicit := b.Options[OptionAssetLibrary]
	if !explicit {
		lib = b.Provider
	}
	if lib == "none" {
		return nil, nil
	}
	rv, found := r.reviewers[lib]
	if !found {
		if explicit {
			return nil, fmt.Errorf("options.%s %q names no asset library of this gateway (%s, or none)",
				OptionAssetLibrary, lib, strings.Join(slices.Sorted(maps.Keys(r.reviewers)), ", "))
		}
		return nil, nil
	}
	if br, ok := rv.(BackendReviewer); ok && !br.ReviewsBackend(b) {
		if explicit {
			return nil, fmt.Errorf("asset library %q cannot review this backend (provider %q with these options; docs/media-tasks.md)", lib, b.Provider)
		}
		return nil, nil
	}
	return rv, nil
}
