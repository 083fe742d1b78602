package pricing

import (
	"math"
	"math/bits"

	"github.com/shopspring/decimal"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

// fastSet is a priceSet in fixed point for the allocation-free path of
// Charge: every price as exact quota per unit (per token for token prices) ×
// 10^scale, as int64. It gives exactly the decimal result (same sum, same
// single half-up rounding) and is used only when every value fits; on any
// overflow Charge falls back to decimal arithmetic.
type fastSet struct {
	ok  bool
	pow int64 // 10^scale
	unit, inputImage, input,
	textIn, cachedTextIn, cacheWrite, imageIn, cachedImageIn, textOut, imageOut,
	minimum int64
}

var (
	quotaPerUSD     = decimal.NewFromInt(billing.QuotaPerUSD)
	quotaPerMTokUSD = decimal.New(5, -1) // 500000 quota per USD / 1e6 tokens
	maxFastScale    = int32(18)
	pow10           = func() (p [19]int64) {
		p[0] = 1
		for i := 1; i < len(p); i++ {
			p[i] = p[i-1] * 10
		}
		return
	}()
)

func buildFast(p *priceSet, chargeType v1.ChargeType, minimumUSD decimal.Decimal) fastSet {
	unitFactor := quotaPerUSD
	if chargeType == v1.ChargePerToken {
		unitFactor = quotaPerMTokUSD
	}
	vals := []decimal.Decimal{
		p.unit.Mul(unitFactor),
		p.inputImage.Mul(quotaPerUSD),
		p.input.Mul(quotaPerUSD),
		p.textIn.Mul(quotaPerMTokUSD),
		p.cachedTextIn.Mul(quotaPerMTokUSD),
		p.cacheWrite.Mul(quotaPerMTokUSD),
		p.imageIn.Mul(quotaPerMTokUSD),
		p.cachedImageIn.Mul(quotaPerMTokUSD),
		p.textOut.Mul(quotaPerMTokUSD),
		p.imageOut.Mul(quotaPerMTokUSD),
		minimumUSD.Mul(quotaPerUSD),
	}
	scale := int32(0)
	for _, v := range vals {
		if e := v.Exponent(); e < 0 && -e > scale {
			scale = -e
		}
	}
	if scale > maxFastScale {
		return fastSet{}
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		s := v.Shift(scale)
		if !s.IsInteger() {
			return fastSet{}
		}
		bi := s.BigInt()
		if !bi.IsInt64() {
			return fastSet{}
		}
		out[i] = bi.Int64()
	}
	return fastSet{
		ok: true, pow: pow10[scale],
		unit: out[0], inputImage: out[1], input: out[2],
		textIn: out[3], cachedTextIn: out[4], cacheWrite: out[5], imageIn: out[6],
		cachedImageIn: out[7], textOut: out[8], imageOut: out[9], minimum: out[10],
	}
}

// fixedSum accumulates non-negative qty × price products, reporting overflow.
type fixedSum struct {
	v        int64
	overflow bool
}

func (s *fixedSum) add(qty, price int64) {
	if qty == 0 || price == 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(qty), uint64(price))
	if hi != 0 || lo > math.MaxInt64 || int64(lo) > math.MaxInt64-s.v {
		s.overflow = true
		return
	}
	s.v += int64(lo)
}

// chargeFast mirrors evaluate for usage that passed checkUsage. ok is false
// when the fixed-point representation cannot hold the amount.
func (r *Rule) chargeFast(f *fastSet, u *Usage) (billing.Quota, bool) {
	if !f.ok {
		return 0, false
	}
	var s fixedSum
	switch r.spec.ChargeType {
	case v1.ChargePerRequest:
		s.add(u.Requests, f.unit)
		if r.base.hasInputImage && u.Requests > 0 {
			free := int64(0)
			if r.spec.FreeInputImageCount != nil {
				free = int64(*r.spec.FreeInputImageCount)
			}
			if billed := u.InputImages - free; billed > 0 {
				hi, n := bits.Mul64(uint64(billed), uint64(u.Requests))
				if hi != 0 || n > math.MaxInt64 {
					return 0, false
				}
				s.add(int64(n), f.inputImage)
			}
		}
	case v1.ChargePerSecond:
		s.add(u.OutputSeconds, f.unit)
		if r.base.hasInput {
			s.add(u.InputVideoSeconds, f.input)
		}
	case v1.ChargePerToken:
		if r.spec.PriceBasis == v1.BasisTotalTokens {
			s.add(u.InputTextTokens, f.unit)
			s.add(u.InputImageTokens, f.unit)
			s.add(u.OutputTextTokens, f.unit)
			s.add(u.OutputImageTokens, f.unit)
			break
		}
		s.add(u.InputTextTokens-u.CachedTextTokens-u.CacheWriteTokens, f.textIn)
		s.add(u.CachedTextTokens, f.cachedTextIn)
		s.add(u.CacheWriteTokens, f.cacheWrite)
		s.add(u.InputImageTokens-u.CachedImageTokens, f.imageIn)
		s.add(u.CachedImageTokens, f.cachedImageIn)
		s.add(u.OutputTextTokens, f.textOut)
		s.add(u.OutputImageTokens, f.imageOut)
	}
	if s.overflow {
		return 0, false
	}
	total := s.v
	if r.hasMin && !u.Failed && total < f.minimum {
		total = f.minimum
	}
	if f.pow == 1 {
		return billing.Quota(total), true
	}
	half := f.pow / 2
	if total > math.MaxInt64-half {
		return 0, false
	}
	// Half up: 10^scale is even, so an exact half rounds up.
	return billing.Quota((total + half) / f.pow), true
}
