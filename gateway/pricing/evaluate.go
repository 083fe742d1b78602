package pricing

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// Usage is what a request measurably consumed. Every count is non-negative;
// fields a charge type does not use are ignored.
//
// Token counts follow the contract's image token usage object: cached tokens
// are a subset of input tokens. InputTextTokens therefore counts every text
// input token, including the ones read from a prompt cache (CachedTextTokens)
// and the ones written to it (CacheWriteTokens); adapters whose upstream
// reports cache tokens apart from input tokens add them up before calling.
type Usage struct {
	// Requests is the number of successful outputs (images of a request with
	// n outputs; 1 for a plain request). per_request.
	Requests int64
	// InputImages is the number of input (reference) images. per_request.
	InputImages int64
	// OutputSeconds is the duration of the generated output. per_second.
	OutputSeconds int64
	// InputVideoSeconds is the duration of input video, billed at
	// inputUnitPrice when the rule sets one. per_second.
	InputVideoSeconds int64

	// InputTextTokens counts text input tokens including cached ones.
	InputTextTokens int64
	// CachedTextTokens are input text tokens read from a prompt cache.
	CachedTextTokens int64
	// CacheWriteTokens are input text tokens written to a prompt cache.
	CacheWriteTokens int64
	// InputImageTokens counts image input tokens including cached ones.
	InputImageTokens int64
	// CachedImageTokens are image input tokens read from a cache.
	CachedImageTokens int64
	// OutputTextTokens and OutputImageTokens are the generated tokens.
	OutputTextTokens  int64
	OutputImageTokens int64

	// Failed marks a request that did not succeed but still consumed billable
	// usage (a stream cut after output began): it is charged for its usage
	// without the minimum-charge floor, which applies to successful requests.
	Failed bool
}

// Line is one component of a charge.
type Line struct {
	// Item names the quantity: requests, input_images, output_seconds,
	// input_video_seconds, total_tokens, input_tokens, cached_input_tokens,
	// cache_write_tokens, image_input_tokens, cached_image_input_tokens,
	// output_tokens, image_output_tokens, or minimum_charge.
	Item string
	// Quantity is the number of units billed.
	Quantity int64
	// UnitPriceUSD is the effective price of one unit (per 1 million tokens
	// for token items), group ratio and peak window included.
	UnitPriceUSD decimal.Decimal
	// AmountUSD is the exact amount of the line.
	AmountUSD decimal.Decimal
}

// Breakdown explains a charge. TotalUSD is exact; Quota is TotalUSD
// converted once by billing.QuotaFromUSD.
type Breakdown struct {
	// Rule is "namespace/name" of the PriceRule that priced the request.
	Rule       string
	ChargeType v1.ChargeType
	PriceBasis v1.PriceBasis
	// PeakWindow is the index in spec.peakWindows that applied, -1 off-peak.
	PeakWindow int
	// GroupRatio is the rule's group ratio, already included in every price.
	GroupRatio decimal.Decimal
	Lines      []Line
	// SubtotalUSD is the sum of the lines before the minimum charge.
	SubtotalUSD decimal.Decimal
	// MinimumApplied is true when the minimum charge raised the total.
	MinimumApplied bool
	TotalUSD       decimal.Decimal
	Quota          billing.Quota
}

// Charge is the hot-path evaluation: the quota to settle for usage measured
// on a request accepted at instant at (peak windows are read at that instant
// so that the estimate and the settlement of one request agree). It equals
// Quote(...).Quota.
func (r *Rule) Charge(u Usage, at time.Time) (billing.Quota, error) {
	if err := r.checkUsage(&u); err != nil {
		return 0, err
	}
	if r.asBatch {
		return r.ChargeBatch(u, at)
	}
	p, _ := r.pricesAt(at)
	if q, ok := r.chargeFast(&p.fast, &u); ok {
		return q, nil
	}
	return r.chargeDecimal(&u, at)
}

// chargeDecimal is Charge in decimal arithmetic only (the reference the
// fixed-point path is tested against).
func (r *Rule) chargeDecimal(u *Usage, at time.Time) (billing.Quota, error) {
	total, _, _, err := r.evaluate(u, at, nil)
	if err != nil {
		return 0, err
	}
	return billing.QuotaFromUSD(total)
}

// BatchRatio is the rule's batch ratio: spec.batchRatio, or
// DefaultBatchRatio when the rule sets none.
func (r *Rule) BatchRatio() decimal.Decimal { return r.batch }

// ForBatch is the rule as it prices a line of a Batch: Charge is
// ChargeBatch, so every estimate, fit and charge made through it (a
// reservation as much as the settlement) is at the batch price.
func (r *Rule) ForBatch() *Rule {
	b := *r
	b.asBatch = true
	return &b
}

// ChargeBatch is Charge for a request run as a line of a Batch: the exact
// USD total of the request (minimum charge included) times the batch ratio,
// converted to quota once, so that a line never costs more than the same
// request sent alone and the rounding is that of one conversion.
func (r *Rule) ChargeBatch(u Usage, at time.Time) (billing.Quota, error) {
	total, _, _, err := r.evaluate(&u, at, nil)
	if err != nil {
		return 0, err
	}
	return billing.QuotaFromUSD(total.Mul(r.batch))
}

// Quote is Charge with the breakdown of how the amount was reached.
func (r *Rule) Quote(u Usage, at time.Time) (Breakdown, error) {
	b := Breakdown{
		Rule:       r.Key(),
		ChargeType: r.spec.ChargeType,
		PriceBasis: r.spec.PriceBasis,
		GroupRatio: r.ratio,
		Lines:      make([]Line, 0, 4),
	}
	total, sub, win, err := r.evaluate(&u, at, &b.Lines)
	if err != nil {
		return Breakdown{}, err
	}
	b.PeakWindow = win
	b.SubtotalUSD = sub
	b.TotalUSD = total
	b.MinimumApplied = total.Cmp(sub) != 0
	if b.Quota, err = billing.QuotaFromUSD(total); err != nil {
		return Breakdown{}, err
	}
	return b, nil
}

// EstimateInputTokens is the reservation estimate of a text request's input
// tokens from the size of its JSON body: one token per 3 bytes, rounded up.
// Text averages 3–4 UTF-8 bytes per token in English and about 3 in CJK
// scripts, and the body also carries JSON keys and punctuation, so the
// estimate errs on the high side; settlement corrects it.
func EstimateInputTokens(bodyBytes int64) int64 {
	if bodyBytes <= 0 {
		return 0
	}
	return (bodyBytes + 2) / 3
}

// EstimateText is the quota to reserve before a text request: input tokens
// estimated from the body size (EstimateInputTokens), all of them priced as
// uncached input, plus maxTokens output tokens as the upper bound of the
// output (pass the effective cap: the request's max_tokens, or the route's
// maxOutputTokens when the request sets none). A per_request rule reserves
// one request. The minimum charge applies.
func (r *Rule) EstimateText(bodyBytes, maxTokens int64, at time.Time) (billing.Quota, error) {
	if maxTokens < 0 {
		maxTokens = 0
	}
	return r.Charge(Usage{
		Requests:         1,
		InputTextTokens:  EstimateInputTokens(bodyBytes),
		OutputTextTokens: maxTokens,
	}, at)
}

// MediaRequest describes an image or video submission for a reservation.
type MediaRequest struct {
	// Outputs is n, the number of images requested (default 1 when 0).
	Outputs int64
	// InputImages is the number of reference images.
	InputImages int64
	// DurationSeconds is the requested video duration. A model-decided
	// duration (-1 in the contract) must be replaced by the model's maximum
	// before the call.
	DurationSeconds int64
	// InputVideoSeconds is the total duration of input videos.
	InputVideoSeconds int64
	// PromptBytes is the length of the prompt text (per_token estimates:
	// a token is at least one byte, so the byte count bounds the tokens).
	PromptBytes int64
	// VideoWidth and VideoHeight are the largest pixel size the request
	// can produce (per_token video estimates; see VideoTokens).
	VideoWidth, VideoHeight int64
}

// Token budgets of a per_token image estimate: the reservation must cover
// what the model may report, and settlement returns the rest. 6 240 is the
// largest output of OpenAI's gpt-image-1 table (high quality, 1024x1536);
// a reference image is budgeted the same.
const (
	ImageOutputTokenBudget = 6240
	ImageInputTokenBudget  = 6240
)

// VideoTokenFPS is the frame rate a per_token video estimate assumes
// (Seedance renders 24 frames a second).
const VideoTokenFPS = 24

// VideoTokens is the token estimate of a token-priced video: Ark's
// published formula, tokens = width × height × fps × seconds / 1024, with
// each side rounded up to a multiple of 32 (the models' pixel sizes are
// codec-aligned and may exceed the nominal size: 1080p is 1920x1088 on some
// models) and VideoTokenFPS, rounded up.
func VideoTokens(width, height, seconds int64) int64 {
	if width <= 0 || height <= 0 || seconds <= 0 {
		return 0
	}
	up := func(v int64) int64 { return (v + 31) / 32 * 32 }
	return (up(width)*up(height)*VideoTokenFPS*seconds + 1023) / 1024
}

// EstimateMedia is the quota to reserve before an image or video submission.
// per_request reserves n outputs with their reference images, per_second the
// requested duration, per_token the prompt's bytes as text tokens plus, for
// an image, the token budgets per reference and output image, for a video
// VideoTokens of the requested duration and of the input video seconds at
// the largest size the request can produce.
func (r *Rule) EstimateMedia(m MediaRequest, at time.Time) (billing.Quota, error) {
	if m.Outputs == 0 {
		m.Outputs = 1
	}
	if r.spec.ChargeType == v1.ChargePerToken {
		if m.DurationSeconds > 0 {
			if m.VideoWidth <= 0 || m.VideoHeight <= 0 {
				return 0, fmt.Errorf("%w: %s is priced per token and the video's size is unknown", ErrCannotEstimate, r.Key())
			}
			return r.Charge(Usage{
				InputTextTokens:   max(m.PromptBytes, 1),
				OutputImageTokens: VideoTokens(m.VideoWidth, m.VideoHeight, m.DurationSeconds+m.InputVideoSeconds),
			}, at)
		}
		return r.Charge(Usage{
			InputTextTokens:   max(m.PromptBytes, 1),
			InputImageTokens:  m.InputImages * ImageInputTokenBudget,
			OutputImageTokens: m.Outputs * ImageOutputTokenBudget,
		}, at)
	}
	if m.DurationSeconds < 0 {
		return 0, fmt.Errorf("%w: duration %d: pass the model's maximum duration for a model-decided duration", ErrInvalidUsage, m.DurationSeconds)
	}
	return r.Charge(Usage{
		Requests:          m.Outputs,
		InputImages:       m.InputImages,
		OutputSeconds:     m.DurationSeconds,
		InputVideoSeconds: m.InputVideoSeconds,
	}, at)
}

// summer accumulates exact amounts and, when lines is not nil, the breakdown.
type summer struct {
	sum   decimal.Decimal
	lines *[]Line
}

func (s *summer) add(item string, qty int64, price decimal.Decimal, perMillion bool) {
	if qty == 0 {
		return
	}
	amount := price.Mul(decimal.NewFromInt(qty))
	if perMillion {
		amount = amount.Shift(-6) // exact: / 1 000 000
	}
	s.sum = s.sum.Add(amount)
	if s.lines != nil {
		*s.lines = append(*s.lines, Line{Item: item, Quantity: qty, UnitPriceUSD: price, AmountUSD: amount})
	}
}

// checkUsage refuses negative quantities and cached tokens exceeding the
// input tokens they are a subset of.
func (r *Rule) checkUsage(u *Usage) error {
	for _, v := range [...]int64{u.Requests, u.InputImages, u.OutputSeconds, u.InputVideoSeconds,
		u.InputTextTokens, u.CachedTextTokens, u.CacheWriteTokens, u.InputImageTokens,
		u.CachedImageTokens, u.OutputTextTokens, u.OutputImageTokens} {
		if v < 0 {
			return fmt.Errorf("%w: negative quantity", ErrInvalidUsage)
		}
	}
	if r.spec.ChargeType == v1.ChargePerToken && r.spec.PriceBasis == v1.BasisTextInputTokens &&
		(u.InputTextTokens-u.CachedTextTokens < u.CacheWriteTokens || u.CachedImageTokens > u.InputImageTokens) {
		return fmt.Errorf("%w: cached tokens exceed input tokens (cached tokens are a subset of input tokens)", ErrInvalidUsage)
	}
	return nil
}

// evaluate computes the exact USD total (minimum included) and the subtotal.
func (r *Rule) evaluate(u *Usage, at time.Time, lines *[]Line) (total, subtotal decimal.Decimal, win int, err error) {
	if err := r.checkUsage(u); err != nil {
		return total, subtotal, -1, err
	}
	p, win := r.pricesAt(at)
	s := summer{sum: decimal.Zero, lines: lines}
	switch r.spec.ChargeType {
	case v1.ChargePerRequest:
		s.add("requests", u.Requests, p.unit, false)
		if p.hasInputImage && u.Requests > 0 {
			free := int64(0)
			if r.spec.FreeInputImageCount != nil {
				free = int64(*r.spec.FreeInputImageCount)
			}
			if billed := u.InputImages - free; billed > 0 {
				// Reference images are billed with every output request.
				s.add("input_images", billed*u.Requests, p.inputImage, false)
			}
		}
	case v1.ChargePerSecond:
		s.add("output_seconds", u.OutputSeconds, p.unit, false)
		if p.hasInput {
			s.add("input_video_seconds", u.InputVideoSeconds, p.input, false)
		}
	case v1.ChargePerToken:
		if r.spec.PriceBasis == v1.BasisTotalTokens {
			s.add("total_tokens", u.InputTextTokens+u.InputImageTokens+u.OutputTextTokens+u.OutputImageTokens, p.unit, true)
			break
		}
		uncachedText := u.InputTextTokens - u.CachedTextTokens - u.CacheWriteTokens
		uncachedImage := u.InputImageTokens - u.CachedImageTokens
		if uncachedText < 0 || uncachedImage < 0 {
			return total, subtotal, -1, fmt.Errorf("%w: cached tokens exceed input tokens (cached tokens are a subset of input tokens)", ErrInvalidUsage)
		}
		s.add("input_tokens", uncachedText, p.textIn, true)
		s.add("cached_input_tokens", u.CachedTextTokens, p.cachedTextIn, true)
		s.add("cache_write_tokens", u.CacheWriteTokens, p.cacheWrite, true)
		s.add("image_input_tokens", uncachedImage, p.imageIn, true)
		s.add("cached_image_input_tokens", u.CachedImageTokens, p.cachedImageIn, true)
		s.add("output_tokens", u.OutputTextTokens, p.textOut, true)
		s.add("image_output_tokens", u.OutputImageTokens, p.imageOut, true)
	}
	subtotal, total = s.sum, s.sum
	if r.hasMin && !u.Failed && total.Cmp(r.minimum) < 0 {
		total = r.minimum
		if lines != nil {
			*lines = append(*lines, Line{Item: "minimum_charge", Quantity: 1, UnitPriceUSD: r.minimum, AmountUSD: r.minimum.Sub(subtotal)})
		}
	}
	return total, subtotal, win, nil
}

// OutputTokensThatFit is the largest number of output tokens, at most
// maxTokens, that a text request of bodyBytes can be reserved for within
// available quota (the money left after every balance and limit is
// counted), and the quota that reservation is (EstimateText of it). It is 0
// when not even one output token fits besides the input. Charge does not
// fall as output grows, so a binary search over it finds the bound exactly,
// with the rule's own arithmetic (fixed point on the hot path, the one
// rounding, the minimum charge, a total_tokens basis, peak windows).
func (r *Rule) OutputTokensThatFit(bodyBytes, maxTokens int64, at time.Time, available billing.Quota) (int64, billing.Quota, error) {
	if maxTokens < 1 {
		return 0, 0, nil
	}
	cost := func(n int64) (billing.Quota, error) { return r.EstimateText(bodyBytes, n, at) }
	q, err := cost(1)
	if err != nil || q > available {
		return 0, 0, err
	}
	lo, hi := int64(1), maxTokens // cost(lo) fits; the answer is in [lo, hi]
	if q, err = cost(hi); err != nil {
		return 0, 0, err
	} else if q <= available {
		return hi, q, nil
	}
	hi-- // cost(hi+1) does not fit
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		c, err := cost(mid)
		if err != nil {
			return 0, 0, err
		}
		if c <= available {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	q, err = cost(lo)
	return lo, q, err
}
