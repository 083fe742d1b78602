package pricing

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Facts are the request properties price conditions are compared with.
type Facts struct {
	// Resolution is the output resolution after the model's default is
	// applied (see DefaultResolution); empty when the model has none.
	// Compared case-insensitively ("2K" = "2k").
	Resolution string
	// HasVideoInput is true when the request carries input video.
	HasVideoInput bool
}

// conditionsMatch reports whether every condition c sets equals the fact.
func conditionsMatch(c *v1.PriceConditions, f Facts) bool {
	if c == nil {
		return true
	}
	if c.Resolution != "" && !strings.EqualFold(c.Resolution, f.Resolution) {
		return false
	}
	if c.HasVideoInput != nil && *c.HasVideoInput != f.HasVideoInput {
		return false
	}
	return true
}

// Matches reports whether the rule's conditions all equal the request facts.
func (r *Rule) Matches(f Facts) bool { return conditionsMatch(r.spec.Conditions, f) }

func condResolution(c *v1.PriceConditions) string {
	if c == nil {
		return ""
	}
	return c.Resolution
}

func condVideo(c *v1.PriceConditions) *bool {
	if c == nil {
		return nil
	}
	return c.HasVideoInput
}

func specificity(c *v1.PriceConditions) int {
	n := 0
	if condResolution(c) != "" {
		n++
	}
	if condVideo(c) != nil {
		n++
	}
	return n
}

// SameConditions reports whether a and b set exactly the same conditions to
// the same values (resolution compared case-insensitively).
func SameConditions(a, b *v1.PriceConditions) bool {
	if !strings.EqualFold(condResolution(a), condResolution(b)) {
		return false
	}
	va, vb := condVideo(a), condVideo(b)
	if (va == nil) != (vb == nil) {
		return false
	}
	return va == nil || *va == *vb
}

// Overlaps reports whether two rules conflict: same model, same group, equal
// specificity, and conditions that can both match one request (for each
// condition, one of them leaves it unset or both set the same value). Rules
// of different specificity never conflict (the more specific wins), nor do
// rules whose conditions exclude each other (1080p and 720p).
//
// The PriceRule controller compares rules of one namespace with each other
// and rejects the later one. A tenant rule with the same conditions as a
// platform rule is not a conflict but the customer price that replaces it.
func Overlaps(a, b v1.PriceRuleSpec) bool {
	if a.Model != b.Model || GroupOf(&a) != GroupOf(&b) {
		return false
	}
	ca, cb := a.Conditions, b.Conditions
	if specificity(ca) != specificity(cb) {
		return false
	}
	ra, rb := condResolution(ca), condResolution(cb)
	if ra != "" && rb != "" && !strings.EqualFold(ra, rb) {
		return false
	}
	va, vb := condVideo(ca), condVideo(cb)
	if va != nil && vb != nil && *va != *vb {
		return false
	}
	return true
}

// better reports whether a wins over b among rules that match a request:
// the more specific; then the customer (tenant) price; then the older rule;
// then the lower namespace/name.
func better(a, b *Rule) bool {
	if a.specific != b.specific {
		return a.specific > b.specific
	}
	if a.Platform != b.Platform {
		return !a.Platform
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// replaced reports whether platform rule p is hidden by a tenant rule of the
// same model, group and conditions.
func replaced(p *Rule, rules []*Rule) bool {
	if !p.Platform {
		return false
	}
	for _, t := range rules {
		if !t.Platform && t.group == p.group && t.spec.Model == p.spec.Model && SameConditions(t.spec.Conditions, p.spec.Conditions) {
			return true
		}
	}
	return false
}

// Select picks the rule that prices a request among the published rules
// visible to the tenant (platform rules and the tenant's own; rules of other
// models or groups are skipped). A tenant rule replaces the platform rule of
// the same model, group and conditions. Among the matching rules the most
// specific wins; ties go to the tenant rule, then the oldest, then by
// namespace/name, so the result is deterministic even when the controller
// has not yet rejected an overlap. ErrNoPrice when none matches.
func Select(rules []*Rule, model, group string, f Facts) (*Rule, error) {
	var best *Rule
	for _, r := range rules {
		if string(r.spec.Model) != model || r.group != group || !r.Matches(f) {
			continue
		}
		if best != nil && !better(r, best) {
			continue
		}
		if replaced(r, rules) {
			continue
		}
		best = r
	}
	if best == nil {
		return nil, fmt.Errorf("%w for model %q, group %q", ErrNoPrice, model, group)
	}
	return best, nil
}

// Visible returns the rules of model and group that a tenant sees after
// customer prices replaced platform prices, ordered by selection preference
// (most specific first).
func Visible(rules []*Rule, model, group string) []*Rule {
	var out []*Rule
	for _, r := range rules {
		if string(r.spec.Model) == model && r.group == group && !replaced(r, rules) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return better(out[i], out[j]) })
	return out
}

type nsModel struct{ ns, model string }

type nsModelGroup struct{ ns, model, group string }

// Table indexes compiled published rules by namespace and model for the hot
// path. Build one with NewTable whenever the informer cache of PriceRules
// changes; Select does not allocate.
type Table struct {
	system string
	rules  map[nsModel][]*Rule
	broken map[nsModelGroup]error
}

// NewTable compiles the published rules among prs (unpublished ones are
// skipped, see IsPublished). A published rule that fails to compile makes its
// (namespace, model, group) unavailable: Select returns ErrPriceUnavailable
// rather than falling back to another price.
func NewTable(systemNamespace string, prs []v1.PriceRule) *Table {
	t := &Table{system: systemNamespace, rules: map[nsModel][]*Rule{}, broken: map[nsModelGroup]error{}}
	for i := range prs {
		pr := &prs[i]
		if !IsPublished(pr) {
			continue
		}
		r, err := Compile(pr, systemNamespace)
		if err != nil {
			t.broken[nsModelGroup{pr.Namespace, string(pr.Spec.Model), GroupOf(&pr.Spec)}] = err
			continue
		}
		k := nsModel{pr.Namespace, string(pr.Spec.Model)}
		t.rules[k] = append(t.rules[k], r)
	}
	return t
}

// Rules returns the compiled rules of model visible to a tenant namespace:
// the platform rules followed by the tenant's own (every group).
func (t *Table) Rules(tenantNamespace, model string) []*Rule {
	p := t.rules[nsModel{t.system, model}]
	if tenantNamespace == t.system || tenantNamespace == "" {
		return append([]*Rule(nil), p...)
	}
	out := make([]*Rule, 0, len(p)+len(t.rules[nsModel{tenantNamespace, model}]))
	out = append(out, p...)
	return append(out, t.rules[nsModel{tenantNamespace, model}]...)
}

// Select picks the rule pricing (model, group, facts) for a tenant: like the
// package-level Select over the platform rules and the tenant's own.
// ErrPriceUnavailable when a published rule of the model and group (platform
// or the tenant's) could not be compiled; ErrNoPrice when nothing matches.
func (t *Table) Select(tenantNamespace, model, group string, f Facts) (*Rule, error) {
	if err := t.brokenFor(tenantNamespace, model, group); err != nil {
		return nil, err
	}
	platform := t.rules[nsModel{t.system, model}]
	var tenant []*Rule
	if tenantNamespace != t.system {
		tenant = t.rules[nsModel{tenantNamespace, model}]
	}
	var best *Rule
	for _, r := range tenant {
		if r.group == group && r.Matches(f) && (best == nil || better(r, best)) {
			best = r
		}
	}
	for _, r := range platform {
		if r.group != group || !r.Matches(f) || (best != nil && !better(r, best)) {
			continue
		}
		if replaced(r, tenant) {
			continue
		}
		best = r
	}
	if best == nil {
		return nil, fmt.Errorf("%w for model %q, group %q", ErrNoPrice, model, group)
	}
	return best, nil
}

func (t *Table) brokenFor(tenantNamespace, model, group string) error {
	if len(t.broken) == 0 {
		return nil
	}
	if err, ok := t.broken[nsModelGroup{t.system, model, group}]; ok {
		return fmt.Errorf("%w: %v", ErrPriceUnavailable, err)
	}
	if err, ok := t.broken[nsModelGroup{tenantNamespace, model, group}]; ok {
		return fmt.Errorf("%w: %v", ErrPriceUnavailable, err)
	}
	return nil
}

// Request is everything the one-call evaluation needs.
type Request struct {
	TenantNamespace string
	Model           string
	Group           string
	Facts           Facts
	Usage           Usage
	// At is the instant the request was accepted (peak windows).
	At time.Time
}

// Quote selects the rule for the request and evaluates its usage.
func (t *Table) Quote(req Request) (Breakdown, error) {
	r, err := t.Select(req.TenantNamespace, req.Model, req.Group, req.Facts)
	if err != nil {
		return Breakdown{}, err
	}
	return r.Quote(req.Usage, req.At)
}
