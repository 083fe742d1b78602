package pricing

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// Catalog errors; the /v1/pricing handler maps them to the contract's bodies.
var (
	// ErrInvalidQuery → 400 invalid_request_error.
	ErrInvalidQuery = errors.New("invalid pricing query")
	// ErrModelNotFound → 404 model_not_found (exact model not available to the key).
	ErrModelNotFound = errors.New("model not found")
)

// Catalog limits of the contract.
const (
	DefaultCatalogLimit = 100
	MaxCatalogLimit     = 100
)

// CatalogPage is the GET /v1/pricing envelope.
type CatalogPage struct {
	Object    string        `json:"object"`   // always "list"
	Currency  string        `json:"currency"` // always "USD"
	Data      []CatalogItem `json:"data"`
	HasMore   bool          `json:"has_more"`
	NextAfter string        `json:"next_after"` // empty when has_more is false
}

// CatalogItem is one model of the catalog.
type CatalogItem struct {
	ID     string         `json:"id"`
	Type   string         `json:"type"`   // image, video or embedding
	Prices []CatalogPrice `json:"prices"` // never null; empty when no rate can be published safely
}

// CatalogPrice is one published price. Every amount is an effective USD
// decimal string: customer pricing and group ratio included.
type CatalogPrice struct {
	Group                  string              `json:"group"`
	Conditions             CatalogConditions   `json:"conditions"`
	ChargeType             string              `json:"charge_type"`
	PriceBasis             string              `json:"price_basis"`
	Unit                   string              `json:"unit"`
	UnitPrice              string              `json:"unit_price"`
	InputUnitPrice         string              `json:"input_unit_price,omitempty"`
	InputImageUnitPrice    string              `json:"input_image_unit_price,omitempty"`
	FreeInputImageCount    *int32              `json:"free_input_image_count,omitempty"`
	MinimumChargeUSD       string              `json:"minimum_charge_usd,omitempty"`
	ImageTokenPrices       *CatalogTokenPrices `json:"image_token_prices,omitempty"`
	PricingPeriod          string              `json:"pricing_period,omitempty"`
	PricingTimezone        string              `json:"pricing_timezone,omitempty"`
	PricingScheduleVersion string              `json:"pricing_schedule_version,omitempty"`
	PricingPeakWindows     []CatalogPeakWindow `json:"pricing_peak_windows,omitempty"`
}

// CatalogConditions is the conditions object (always present, possibly {}).
type CatalogConditions struct {
	Resolution    string `json:"resolution,omitempty"`
	HasVideoInput *bool  `json:"has_video_input,omitempty"`
}

// CatalogTokenPrices are effective USD prices per 1 million tokens.
type CatalogTokenPrices struct {
	TextInput        string `json:"text_input"`
	CachedTextInput  string `json:"cached_text_input"`
	ImageInput       string `json:"image_input"`
	CachedImageInput string `json:"cached_image_input"`
	ImageOutput      string `json:"image_output"`
}

// CatalogPeakWindow is one peak window as published: local times in
// pricing_timezone, and either the multiplier applied to every price of the
// entry or the effective unit_price that replaces unit_price inside it.
type CatalogPeakWindow struct {
	Days       []string `json:"days,omitempty"` // omitted = every day
	Start      string   `json:"start"`
	End        string   `json:"end"`
	Multiplier string   `json:"multiplier,omitempty"`
	UnitPrice  string   `json:"unit_price,omitempty"`
}

// CatalogQuery is the parsed query of GET /v1/pricing.
type CatalogQuery struct {
	Model string // exact model ID; empty = every model
	Type  string // "image", "video", "embedding" or empty
	Limit int    // 1–100; 0 = 100
	After string // cursor from next_after
}

// ParseCatalogQuery parses the query string of GET /v1/pricing: model, type,
// limit and after, each at most once; anything else is ErrInvalidQuery.
func ParseCatalogQuery(values url.Values) (CatalogQuery, error) {
	var q CatalogQuery
	for k, vs := range values {
		if len(vs) != 1 {
			return q, fmt.Errorf("%w: parameter %q given %d times", ErrInvalidQuery, k, len(vs))
		}
		v := vs[0]
		switch k {
		case "model":
			q.Model = v
		case "type":
			if !catalogType(v1.ModelType(v)) {
				return q, fmt.Errorf("%w: type must be image, video or embedding", ErrInvalidQuery)
			}
			q.Type = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxCatalogLimit {
				return q, fmt.Errorf("%w: limit must be an integer from 1 to %d", ErrInvalidQuery, MaxCatalogLimit)
			}
			q.Limit = n
		case "after":
			if v == "" { // an empty cursor is the first page, as next_after is empty on the last
				continue
			}
			if _, err := decodeCursor(v); err != nil {
				return q, err
			}
			q.After = v
		default:
			return q, fmt.Errorf("%w: unsupported parameter %q", ErrInvalidQuery, k)
		}
	}
	return q, nil
}

const cursorPrefix = "m1:"

// EncodeCursor makes the opaque next_after cursor of a model ID.
func EncodeCursor(model string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + model))
}

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) || len(b) == len(cursorPrefix) {
		return "", fmt.Errorf("%w: after is not a cursor from next_after", ErrInvalidQuery)
	}
	return string(b[len(cursorPrefix):]), nil
}

// CatalogInput is the state the catalog is built from: the informer cache's
// contents, unfiltered (BuildCatalog keeps the system and tenant namespaces,
// published rules and image/video routes), and what the calling key may use.
type CatalogInput struct {
	SystemNamespace string
	TenantNamespace string
	Routes          []v1.ModelRoute
	Rules           []v1.PriceRule
	// Groups are the routing groups of the key: its one group, or every group
	// the tenant may use for a key with automatic group selection.
	Groups []string
	// ModelAllowed is the key's model allow-list; nil allows every model.
	ModelAllowed func(model string) bool
}

// DefaultResolution is the resolution a request of a model family gets when
// it sets none (the contract's defaults): 1080p for the all-in-one video
// family, 2K for the multi-image family, 1K for the single-image family,
// none for image editing.
func DefaultResolution(p v1.ValidationProfile) string {
	switch p {
	case v1.ProfileAllInOneVideo:
		return "1080p"
	case v1.ProfileMultiImage:
		return "2K"
	case v1.ProfileSingleImage:
		return "1K"
	}
	return ""
}

// Backend option keys that declare what a backend can serve, used to decide
// whether a backend is compatible with a price's conditions. A backend
// without them serves every resolution and accepts video input.
const (
	// OptionResolutions is a comma-separated list of resolutions ("720p,1080p").
	OptionResolutions = "resolutions"
	// OptionVideoInput "false" marks a backend that does not accept input video.
	OptionVideoInput = "videoInput"
)

func backendCompatible(b *v1.Backend, c CatalogConditions) bool {
	if c.Resolution != "" {
		if list, ok := b.Options[OptionResolutions]; ok {
			found := false
			for _, r := range strings.Split(list, ",") {
				if strings.EqualFold(strings.TrimSpace(r), c.Resolution) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	if c.HasVideoInput != nil && *c.HasVideoInput && strings.EqualFold(strings.TrimSpace(b.Options[OptionVideoInput]), "false") {
		return false
	}
	return true
}

func backendGroups(b *v1.Backend) []v1.GroupName {
	if len(b.Groups) == 0 {
		return []v1.GroupName{v1.DefaultGroup}
	}
	return b.Groups
}

func servesGroup(b *v1.Backend, group string) bool {
	for _, g := range backendGroups(b) {
		if string(g) == group {
			return true
		}
	}
	return false
}

func backendReady(rt *v1.ModelRoute, name string) bool {
	for i := range rt.Status.Backends {
		if rt.Status.Backends[i].Name == name {
			return rt.Status.Backends[i].Ready
		}
	}
	return false
}

// BuildCatalog builds one page of GET /v1/pricing for the calling key. It is
// a pure function of its input; see docs/pricing.md for every rule.
func BuildCatalog(in CatalogInput, q CatalogQuery) (*CatalogPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultCatalogLimit
	}
	if limit < 1 || limit > MaxCatalogLimit {
		return nil, fmt.Errorf("%w: limit must be an integer from 1 to %d", ErrInvalidQuery, MaxCatalogLimit)
	}
	if q.Type != "" && !catalogType(v1.ModelType(q.Type)) {
		return nil, fmt.Errorf("%w: type must be image, video or embedding", ErrInvalidQuery)
	}
	after := ""
	if q.After != "" {
		var err error
		if after, err = decodeCursor(q.After); err != nil {
			return nil, err
		}
	}
	groups := dedupSorted(in.Groups)

	// Routes visible to the tenant: its own route wins over the platform one.
	routes := map[string]*v1.ModelRoute{}
	for i := range in.Routes {
		rt := &in.Routes[i]
		if rt.Namespace != in.SystemNamespace && rt.Namespace != in.TenantNamespace {
			continue
		}
		if rt.DeletionTimestamp != nil {
			continue
		}
		id := string(rt.Spec.Model)
		if prev, ok := routes[id]; ok && !routeWins(rt, prev, in.SystemNamespace) {
			continue
		}
		routes[id] = rt
	}
	// Models available to the key: image, video or embedding, allowed, with at least one
	// enabled backend serving one of its groups (ready or not: a model whose
	// backends are all unready is listed with an empty prices array).
	var ids []string
	for id, rt := range routes {
		if !catalogType(rt.Spec.Type) {
			continue
		}
		if in.ModelAllowed != nil && !in.ModelAllowed(id) {
			continue
		}
		if !hasEnabledBackend(rt, groups) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)

	if q.Model != "" {
		i := sort.SearchStrings(ids, q.Model)
		if i == len(ids) || ids[i] != q.Model {
			return nil, fmt.Errorf("%w: %q", ErrModelNotFound, q.Model)
		}
		ids = ids[i : i+1]
	}

	page := &CatalogPage{Object: "list", Currency: "USD", Data: []CatalogItem{}}
	start := 0
	if after != "" {
		start = sort.Search(len(ids), func(i int) bool { return ids[i] > after })
	}
	var selected []string
	for _, id := range ids[start:] {
		if q.Type != "" && string(routes[id].Spec.Type) != q.Type {
			continue
		}
		if len(selected) == limit {
			page.HasMore = true
			break
		}
		selected = append(selected, id)
	}
	if len(selected) == 0 {
		return page, nil
	}
	if page.HasMore {
		page.NextAfter = EncodeCursor(selected[len(selected)-1])
	}

	// Rules of the selected models only.
	want := make(map[string]bool, len(selected))
	for _, id := range selected {
		want[id] = true
	}
	byModel := map[string][]*Rule{}
	broken := map[[2]string]bool{} // model, group
	for i := range in.Rules {
		pr := &in.Rules[i]
		if !want[string(pr.Spec.Model)] || (pr.Namespace != in.SystemNamespace && pr.Namespace != in.TenantNamespace) || !IsPublished(pr) {
			continue
		}
		r, err := Compile(pr, in.SystemNamespace)
		if err != nil {
			broken[[2]string{string(pr.Spec.Model), GroupOf(&pr.Spec)}] = true
			continue
		}
		byModel[r.Model()] = append(byModel[r.Model()], r)
	}

	for _, id := range selected {
		rt := routes[id]
		item := CatalogItem{ID: id, Type: string(rt.Spec.Type), Prices: []CatalogPrice{}}
		for _, g := range groups {
			if broken[[2]string{id, g}] {
				continue
			}
			item.Prices = append(item.Prices, groupPrices(rt, byModel[id], g)...)
		}
		page.Data = append(page.Data, item)
	}
	return page, nil
}

// catalogType reports whether models of type t are in the catalog: the
// media families and embeddings (text prices are published elsewhere).
func catalogType(t v1.ModelType) bool {
	return t == v1.ModelTypeImage || t == v1.ModelTypeVideo || t == v1.ModelTypeEmbedding
}

func routeWins(a, b *v1.ModelRoute, system string) bool {
	if (a.Namespace == system) != (b.Namespace == system) {
		return a.Namespace != system
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func hasEnabledBackend(rt *v1.ModelRoute, groups []string) bool {
	for i := range rt.Spec.Backends {
		b := &rt.Spec.Backends[i]
		if b.Disabled {
			continue
		}
		for _, g := range groups {
			if servesGroup(b, g) {
				return true
			}
		}
	}
	return false
}

func dedupSorted(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		if out[i] == "" {
			out[i] = v1.DefaultGroup
		}
	}
	sort.Strings(out)
	n := 0
	for i, g := range out {
		if i == 0 || g != out[n-1] {
			out[n] = g
			n++
		}
	}
	return out[:n]
}

// groupPrices renders the prices of one model for one group, or none when the
// group's rules cannot be published safely (two visible rules overlap).
func groupPrices(rt *v1.ModelRoute, rules []*Rule, group string) []CatalogPrice {
	vis := Visible(rules, string(rt.Spec.Model), group)
	if len(vis) == 0 {
		return nil
	}
	for i := range vis {
		for j := i + 1; j < len(vis); j++ {
			if Overlaps(vis[i].spec, vis[j].spec) {
				return nil
			}
		}
	}
	defRes := DefaultResolution(rt.Spec.ValidationProfile)
	variesRes, variesVideo, claimedDefRes, claimedNoVideo := false, false, false, false
	for _, r := range vis {
		c := r.spec.Conditions
		if res := condResolution(c); res != "" {
			variesRes = true
			claimedDefRes = claimedDefRes || strings.EqualFold(res, defRes)
		}
		if v := condVideo(c); v != nil {
			variesVideo = true
			claimedNoVideo = claimedNoVideo || !*v
		}
	}
	var out []CatalogPrice
	for _, r := range vis {
		cond := CatalogConditions{Resolution: condResolution(r.spec.Conditions), HasVideoInput: condVideo(r.spec.Conditions)}
		if cond.HasVideoInput != nil {
			v := *cond.HasVideoInput
			cond.HasVideoInput = &v
		}
		// A model default that affects the price: when the group's prices
		// vary on a key and this rule is the fallback for it, show the
		// default the fallback applies to, unless another rule claims it.
		if cond.Resolution == "" && variesRes && defRes != "" && !claimedDefRes {
			cond.Resolution = defRes
		}
		if cond.HasVideoInput == nil && variesVideo && rt.Spec.Type == v1.ModelTypeVideo && !claimedNoVideo {
			f := false
			cond.HasVideoInput = &f
		}
		if !servedFor(rt, group, cond) {
			continue
		}
		out = append(out, renderPrice(r, group, cond))
	}
	sort.SliceStable(out, func(i, j int) bool { return lessConditions(out[i].Conditions, out[j].Conditions) })
	return out
}

func lessConditions(a, b CatalogConditions) bool {
	if a.Resolution != b.Resolution {
		return a.Resolution < b.Resolution
	}
	rank := func(v *bool) int {
		switch {
		case v == nil:
			return 0
		case !*v:
			return 1
		}
		return 2
	}
	return rank(a.HasVideoInput) < rank(b.HasVideoInput)
}

// servedFor: at least one enabled, ready backend serves the group and is
// compatible with the conditions.
func servedFor(rt *v1.ModelRoute, group string, c CatalogConditions) bool {
	for i := range rt.Spec.Backends {
		b := &rt.Spec.Backends[i]
		if !b.Disabled && servesGroup(b, group) && backendReady(rt, b.Name) && backendCompatible(b, c) {
			return true
		}
	}
	return false
}

func renderPrice(r *Rule, group string, cond CatalogConditions) CatalogPrice {
	s := &r.spec
	p := CatalogPrice{
		Group:                  group,
		Conditions:             cond,
		ChargeType:             string(s.ChargeType),
		PriceBasis:             string(s.PriceBasis),
		Unit:                   string(s.Unit),
		UnitPrice:              FormatDecimal(r.base.unit),
		PricingPeriod:          s.Period,
		PricingTimezone:        s.Timezone,
		PricingScheduleVersion: s.ScheduleVersion,
	}
	if r.base.hasInput {
		p.InputUnitPrice = FormatDecimal(r.base.input)
	}
	if r.base.hasInputImage {
		p.InputImageUnitPrice = FormatDecimal(r.base.inputImage)
	}
	if s.FreeInputImageCount != nil {
		n := *s.FreeInputImageCount
		p.FreeInputImageCount = &n
	}
	if r.hasMin {
		p.MinimumChargeUSD = FormatDecimal(r.minimum)
	}
	if r.base.hasImageTokenPrices {
		p.ImageTokenPrices = &CatalogTokenPrices{
			TextInput:        FormatDecimal(r.base.textIn),
			CachedTextInput:  FormatDecimal(r.base.cachedTextIn),
			ImageInput:       FormatDecimal(r.base.imageIn),
			CachedImageInput: FormatDecimal(r.base.cachedImageIn),
			ImageOutput:      FormatDecimal(r.base.imageOut),
		}
	}
	for i := range s.PeakWindows {
		pw := &s.PeakWindows[i]
		w := CatalogPeakWindow{Start: pw.Start, End: pw.End}
		for _, d := range pw.Days {
			w.Days = append(w.Days, string(d))
		}
		if pw.Multiplier != nil {
			m, _ := decimal.NewFromString(string(*pw.Multiplier)) // validated by Compile
			w.Multiplier = FormatDecimal(m)
		} else {
			w.UnitPrice = FormatDecimal(r.windows[i].prices.unit)
		}
		p.PricingPeakWindows = append(p.PricingPeakWindows, w)
	}
	return p
}

// FormatDecimal renders d in plain notation: no exponent, trailing zeros
// trimmed, "0" for zero ("0.030" → "0.03", "1.50" → "1.5", "2E3" → "2000").
// It does not depend on decimal's global formatting settings.
func FormatDecimal(d decimal.Decimal) string {
	if d.IsZero() {
		return "0"
	}
	places := int32(0)
	if e := d.Exponent(); e < 0 {
		places = -e
	}
	s := d.StringFixed(places)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s
}
