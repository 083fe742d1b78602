package pricing

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // peak windows work in scratch containers without a zoneinfo database

	"github.com/shopspring/decimal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// Errors of the package. Callers compare with errors.Is.
var (
	// ErrInvalidRule: a PriceRule spec cannot be evaluated (bad decimal,
	// charge type combination, time zone, peak window, …). The message says
	// which field.
	ErrInvalidRule = errors.New("invalid price rule")
	// ErrNoPrice: no published rule prices the model for the group and facts.
	ErrNoPrice = errors.New("no published price")
	// ErrPriceUnavailable: a rule that could apply is published but cannot be
	// evaluated safely; never fall back to another (public) price.
	ErrPriceUnavailable = errors.New("price cannot be evaluated safely")
	// ErrInvalidUsage: measured usage is negative or inconsistent (cached
	// tokens exceeding input tokens).
	ErrInvalidUsage = errors.New("invalid usage")
	// ErrCannotEstimate: the rule's charge depends on quantities that are not
	// known before the request (token counts of an image model); the caller
	// must estimate usage itself and call Charge.
	ErrCannotEstimate = errors.New("charge cannot be estimated from the request")
)

var one = decimal.NewFromInt(1)

// DefaultBatchRatio is the batch price of a rule that sets no batchRatio:
// half price, as OpenAI's Batches API and Anthropic's Message Batches charge.
var DefaultBatchRatio = decimal.New(5, -1)

// Rule is a compiled PriceRule: every decimal parsed, group ratio and peak
// window prices applied in advance, the time zone loaded. A Rule is immutable
// and safe for concurrent use; build it once per cache change, not per request.
type Rule struct {
	// Namespace and Name identify the PriceRule object.
	Namespace, Name string
	// Created is the object's creation timestamp (tie-breaker of selection).
	Created time.Time
	// Platform is true for a rule of the system namespace, false for a
	// tenant's customer price.
	Platform bool

	spec  v1.PriceRuleSpec
	group string
	loc   *time.Location
	ratio decimal.Decimal
	batch decimal.Decimal
	// asBatch: this is the rule's batch view (ForBatch), whose every
	// charge and estimate is at the batch price.
	asBatch  bool
	base     priceSet
	windows  []window
	minimum  decimal.Decimal
	hasMin   bool
	specific int
}

// priceSet holds effective USD prices (group ratio and, for a peak window,
// the window's multiplier or unit price applied), with every fallback of
// docs/pricing.md resolved. Token prices are per 1 million tokens.
type priceSet struct {
	unit decimal.Decimal // per request, per second, or per 1M tokens

	// per_request
	inputImage    decimal.Decimal
	hasInputImage bool

	// per_second
	input    decimal.Decimal // per input video second
	hasInput bool

	// per_token text_input_tokens
	textIn, cachedTextIn, cacheWrite   decimal.Decimal
	imageIn, cachedImageIn             decimal.Decimal
	textOut, imageOut                  decimal.Decimal
	hasImageTokenPrices, hasCachePrice bool

	fast fastSet // the same prices in fixed point (see fast.go)
}

type window struct {
	days       uint8 // bit d set = time.Weekday(d) is a day of the window
	start, end int   // minutes after local midnight; end < start crosses midnight
	prices     priceSet
}

// Spec returns the rule's spec (shared with the rule: do not modify what its
// pointers point to).
func (r *Rule) Spec() v1.PriceRuleSpec { return r.spec }

// Model is the model ID the rule prices.
func (r *Rule) Model() string { return string(r.spec.Model) }

// Group is the routing group the rule prices ("default" when the spec names none).
func (r *Rule) Group() string { return r.group }

// Key is "namespace/name" of the PriceRule, for logs and breakdowns.
func (r *Rule) Key() string { return r.Namespace + "/" + r.Name }

// Specificity is the number of conditions the rule sets (0, 1 or 2).
func (r *Rule) Specificity() int { return r.specific }

// GroupOf returns the effective group of a spec ("default" when empty).
func GroupOf(spec *v1.PriceRuleSpec) string {
	if spec.Group == "" {
		return v1.DefaultGroup
	}
	return string(spec.Group)
}

// ValidateSpec reports whether a spec can be compiled and evaluated: every
// decimal string, the charge type / price basis / unit combination, the
// optional fields the charge type allows, the time zone and the peak windows.
// The PriceRule controller uses it (together with Overlaps) before it
// publishes a rule.
func ValidateSpec(spec *v1.PriceRuleSpec) error {
	_, err := compileSpec(spec)
	return err
}

// Compile turns a PriceRule object into a Rule. systemNamespace is the
// namespace of platform rules; every other namespace holds customer prices.
func Compile(pr *v1.PriceRule, systemNamespace string) (*Rule, error) {
	r, err := compileSpec(&pr.Spec)
	if err != nil {
		return nil, fmt.Errorf("pricerule %s/%s: %w", pr.Namespace, pr.Name, err)
	}
	r.Namespace, r.Name = pr.Namespace, pr.Name
	r.Created = pr.CreationTimestamp.Time
	r.Platform = pr.Namespace == systemNamespace
	return r, nil
}

// IsPublished reports whether the rule may be served and billed: its
// Published condition is True for the current generation (the condition's
// observedGeneration, or status.observedGeneration when the condition has
// none) and it is not being deleted. A rule whose spec changed since the
// controller last validated it is not published until it is validated again.
func IsPublished(pr *v1.PriceRule) bool {
	if pr.DeletionTimestamp != nil {
		return false
	}
	for i := range pr.Status.Conditions {
		c := &pr.Status.Conditions[i]
		if c.Type != v1.ConditionPublished {
			continue
		}
		if c.Status != metav1.ConditionTrue {
			return false
		}
		og := c.ObservedGeneration
		if og == 0 {
			og = pr.Status.ObservedGeneration
		}
		return og == pr.Generation
	}
	return false
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRule, fmt.Sprintf(format, args...))
}

func parseOpt(field string, d *v1.Decimal) (decimal.Decimal, bool, error) {
	if d == nil {
		return decimal.Decimal{}, false, nil
	}
	v, err := billing.ParseUSD(string(*d))
	if err != nil {
		return decimal.Decimal{}, false, invalid("%s: %q is not a plain non-negative decimal", field, string(*d))
	}
	return v, true, nil
}

// rawPrices are the spec's prices as written (before ratio and windows).
type rawPrices struct {
	unit                                                          decimal.Decimal
	output, cacheRead, cacheWrite, input, inputImage              decimal.Decimal
	hasOutput, hasCacheRead, hasCacheWrite, hasInput, hasInputImg bool
	itp                                                           [5]decimal.Decimal // text_input, cached_text_input, image_input, cached_image_input, image_output
	hasITP                                                        [5]bool
	anyITP                                                        bool
}

func compileSpec(spec *v1.PriceRuleSpec) (*Rule, error) {
	// A deep copy: the rule outlives the informer cache object it came from.
	r := &Rule{spec: *spec.DeepCopy(), group: GroupOf(spec)}
	if spec.Model == "" {
		return nil, invalid("model is empty")
	}
	switch spec.ChargeType {
	case v1.ChargePerRequest:
		if spec.PriceBasis != v1.BasisRequest || spec.Unit != v1.UnitRequest {
			return nil, invalid("per_request prices use priceBasis request and unit request")
		}
	case v1.ChargePerSecond:
		if spec.PriceBasis != v1.BasisOutputSeconds || spec.Unit != v1.UnitSecond {
			return nil, invalid("per_second prices use priceBasis output_seconds and unit second")
		}
	case v1.ChargePerToken:
		if (spec.PriceBasis != v1.BasisTotalTokens && spec.PriceBasis != v1.BasisTextInputTokens) || spec.Unit != v1.Unit1MTokens {
			return nil, invalid("per_token prices use priceBasis total_tokens or text_input_tokens and unit 1m_tokens")
		}
	default:
		return nil, invalid("chargeType %q is not per_request, per_second or per_token", spec.ChargeType)
	}

	var raw rawPrices
	var err error
	if raw.unit, err = billing.ParseUSD(string(spec.UnitPrice)); err != nil {
		return nil, invalid("unitPrice: %q is not a plain non-negative decimal", string(spec.UnitPrice))
	}
	opt := []struct {
		field string
		in    *v1.Decimal
		out   *decimal.Decimal
		has   *bool
	}{
		{"outputUnitPrice", spec.OutputUnitPrice, &raw.output, &raw.hasOutput},
		{"cacheReadUnitPrice", spec.CacheReadUnitPrice, &raw.cacheRead, &raw.hasCacheRead},
		{"cacheWriteUnitPrice", spec.CacheWriteUnitPrice, &raw.cacheWrite, &raw.hasCacheWrite},
		{"inputUnitPrice", spec.InputUnitPrice, &raw.input, &raw.hasInput},
		{"inputImageUnitPrice", spec.InputImageUnitPrice, &raw.inputImage, &raw.hasInputImg},
	}
	if itp := spec.ImageTokenPrices; itp != nil {
		names := [5]string{"textInput", "cachedTextInput", "imageInput", "cachedImageInput", "imageOutput"}
		ins := [5]*v1.Decimal{itp.TextInput, itp.CachedTextInput, itp.ImageInput, itp.CachedImageInput, itp.ImageOutput}
		for i := range ins {
			opt = append(opt, struct {
				field string
				in    *v1.Decimal
				out   *decimal.Decimal
				has   *bool
			}{"imageTokenPrices." + names[i], ins[i], &raw.itp[i], &raw.hasITP[i]})
		}
	}
	for _, o := range opt {
		if *o.out, *o.has, err = parseOpt(o.field, o.in); err != nil {
			return nil, err
		}
	}
	for _, h := range raw.hasITP {
		raw.anyITP = raw.anyITP || h
	}

	// Optional fields the charge type does not use are refused rather than
	// silently ignored: a price a person wrote must either bill or fail.
	textTokens := spec.ChargeType == v1.ChargePerToken && spec.PriceBasis == v1.BasisTextInputTokens
	if spec.ChargeType != v1.ChargePerRequest && (raw.hasInputImg || spec.FreeInputImageCount != nil) {
		return nil, invalid("inputImageUnitPrice and freeInputImageCount apply to per_request prices only")
	}
	if spec.FreeInputImageCount != nil && (*spec.FreeInputImageCount < 0 || *spec.FreeInputImageCount > 100) {
		return nil, invalid("freeInputImageCount must be between 0 and 100")
	}
	if spec.ChargeType != v1.ChargePerSecond && raw.hasInput {
		return nil, invalid("inputUnitPrice (price per input video second) applies to per_second prices only")
	}
	if !textTokens && (raw.hasOutput || raw.hasCacheRead || raw.hasCacheWrite || spec.ImageTokenPrices != nil) {
		return nil, invalid("outputUnitPrice, cacheReadUnitPrice, cacheWriteUnitPrice and imageTokenPrices apply to per_token prices with priceBasis text_input_tokens only")
	}

	r.ratio = one
	if spec.GroupRatio != nil {
		if r.ratio, _, err = parseOpt("groupRatio", spec.GroupRatio); err != nil {
			return nil, err
		}
	}
	r.batch = DefaultBatchRatio
	if spec.BatchRatio != nil {
		if r.batch, _, err = parseOpt("batchRatio", spec.BatchRatio); err != nil {
			return nil, err
		}
		// A batch line waits up to a day for its answer; it is never
		// charged more than the same request sent alone.
		if r.batch.Cmp(one) > 0 {
			return nil, invalid("batchRatio must be at most 1")
		}
	}
	if spec.MinimumChargeUSD != nil {
		var m decimal.Decimal
		if m, r.hasMin, err = parseOpt("minimumChargeUSD", spec.MinimumChargeUSD); err != nil {
			return nil, err
		}
		r.minimum = m.Mul(r.ratio)
	}
	if c := spec.Conditions; c != nil {
		if c.Resolution != "" {
			r.specific++
		}
		if c.HasVideoInput != nil {
			r.specific++
		}
	}

	r.base = raw.effective(r.ratio, nil, nil)

	r.loc = time.UTC
	if spec.Timezone != "" {
		if r.loc, err = time.LoadLocation(spec.Timezone); err != nil || spec.Timezone == "Local" {
			return nil, invalid("timezone %q is not an IANA time zone", spec.Timezone)
		}
	}
	if len(spec.PeakWindows) > 0 && spec.Timezone == "" {
		return nil, invalid("peakWindows need a timezone")
	}
	for i := range spec.PeakWindows {
		w, err := compileWindow(&spec.PeakWindows[i], &raw, r.ratio)
		if err != nil {
			return nil, invalid("peakWindows[%d]: %v", i, err)
		}
		r.windows = append(r.windows, w)
	}
	r.base.fast = buildFast(&r.base, spec.ChargeType, r.minimum)
	for i := range r.windows {
		r.windows[i].prices.fast = buildFast(&r.windows[i].prices, spec.ChargeType, r.minimum)
	}
	return r, nil
}

// effective resolves fallbacks and applies the group ratio and, for a peak
// window, either a multiplier (every unit price) or an absolute unit price
// (replaces unitPrice; prices that fall back to unitPrice follow it).
func (raw *rawPrices) effective(ratio decimal.Decimal, mult, unitOverride *decimal.Decimal) priceSet {
	unit := raw.unit
	if unitOverride != nil {
		unit = *unitOverride
	}
	scale := ratio
	if mult != nil {
		scale = ratio.Mul(*mult)
	}
	pick := func(has bool, v, fallback decimal.Decimal) decimal.Decimal {
		if has {
			return v
		}
		return fallback
	}
	var p priceSet
	p.unit = unit.Mul(scale)
	p.hasInputImage = raw.hasInputImg
	if raw.hasInputImg {
		p.inputImage = raw.inputImage.Mul(scale)
	}
	p.hasInput = raw.hasInput
	if raw.hasInput {
		p.input = raw.input.Mul(scale)
	}
	// Token prices (per 1M): text input falls back to unitPrice, cached text
	// input to the cache read price then to the text input price, image input
	// to the text input price, cached image input to the image input price,
	// text output to outputUnitPrice then unitPrice, image output to the text
	// output price.
	textIn := pick(raw.hasITP[0], raw.itp[0], unit)
	cachedText := pick(raw.hasCacheRead, raw.cacheRead, textIn)
	cachedText = pick(raw.hasITP[1], raw.itp[1], cachedText)
	cacheWrite := pick(raw.hasCacheWrite, raw.cacheWrite, textIn)
	imageIn := pick(raw.hasITP[2], raw.itp[2], textIn)
	cachedImage := pick(raw.hasITP[3], raw.itp[3], imageIn)
	textOut := pick(raw.hasOutput, raw.output, unit)
	imageOut := pick(raw.hasITP[4], raw.itp[4], textOut)
	p.textIn = textIn.Mul(scale)
	p.cachedTextIn = cachedText.Mul(scale)
	p.cacheWrite = cacheWrite.Mul(scale)
	p.imageIn = imageIn.Mul(scale)
	p.cachedImageIn = cachedImage.Mul(scale)
	p.textOut = textOut.Mul(scale)
	p.imageOut = imageOut.Mul(scale)
	p.hasImageTokenPrices = raw.anyITP
	p.hasCachePrice = raw.hasCacheRead || raw.hasCacheWrite
	return p
}

var weekdays = map[v1.Weekday]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// parseClock parses "HH:MM" (00:00–23:59) into minutes after midnight.
func parseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	digit := func(b byte) (int, bool) { return int(b - '0'), b >= '0' && b <= '9' }
	h1, ok1 := digit(s[0])
	h2, ok2 := digit(s[1])
	m1, ok3 := digit(s[3])
	m2, ok4 := digit(s[4])
	h, m := h1*10+h2, m1*10+m2
	if !ok1 || !ok2 || !ok3 || !ok4 || h > 23 || m > 59 {
		return 0, fmt.Errorf("%q is not HH:MM between 00:00 and 23:59", s)
	}
	return h*60 + m, nil
}

func compileWindow(pw *v1.PeakWindow, raw *rawPrices, ratio decimal.Decimal) (window, error) {
	var w window
	var err error
	if w.start, err = parseClock(pw.Start); err != nil {
		return w, fmt.Errorf("start: %v", err)
	}
	if w.end, err = parseClock(pw.End); err != nil {
		return w, fmt.Errorf("end: %v", err)
	}
	if w.start == w.end {
		return w, errors.New("start and end must differ")
	}
	for _, d := range pw.Days {
		wd, ok := weekdays[v1.Weekday(strings.TrimSpace(string(d)))]
		if !ok {
			return w, fmt.Errorf("day %q is not one of Mon Tue Wed Thu Fri Sat Sun", d)
		}
		w.days |= 1 << wd
	}
	if len(pw.Days) == 0 {
		w.days = 0x7f
	}
	if (pw.Multiplier == nil) == (pw.UnitPrice == nil) {
		return w, errors.New("exactly one of multiplier or unitPrice must be set")
	}
	if pw.Multiplier != nil {
		m, _, err := parseOpt("multiplier", pw.Multiplier)
		if err != nil {
			return w, err
		}
		w.prices = raw.effective(ratio, &m, nil)
	} else {
		u, _, err := parseOpt("unitPrice", pw.UnitPrice)
		if err != nil {
			return w, err
		}
		w.prices = raw.effective(ratio, nil, &u)
	}
	return w, nil
}

func (w *window) on(d time.Weekday) bool { return w.days&(1<<d) != 0 }

// contains reports whether local weekday d at minute m lies in the window. A
// window that crosses midnight belongs to the day it starts on: Fri 22:00–06:00
// covers Friday 22:00 to Saturday 06:00.
func (w *window) contains(d time.Weekday, m int) bool {
	if w.start < w.end {
		return w.on(d) && m >= w.start && m < w.end
	}
	if m >= w.start {
		return w.on(d)
	}
	if m < w.end {
		return w.on((d + 6) % 7)
	}
	return false
}

// PeakWindowAt returns the index in spec.peakWindows of the window that
// applies at instant at (read on the wall clock of the rule's time zone), or
// -1 off-peak. When windows overlap the first listed wins.
func (r *Rule) PeakWindowAt(at time.Time) int {
	if len(r.windows) == 0 {
		return -1
	}
	lt := at.In(r.loc)
	d, m := lt.Weekday(), lt.Hour()*60+lt.Minute()
	for i := range r.windows {
		if r.windows[i].contains(d, m) {
			return i
		}
	}
	return -1
}

func (r *Rule) pricesAt(at time.Time) (*priceSet, int) {
	if i := r.PeakWindowAt(at); i >= 0 {
		return &r.windows[i].prices, i
	}
	return &r.base, -1
}
