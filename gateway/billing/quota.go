package billing

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/shopspring/decimal"
)

// Fixed conversions of the contract: 1 USD = 500000 quota = 200 credits.
const (
	QuotaPerUSD    = 500000
	CreditsPerUSD  = 200
	QuotaPerCredit = QuotaPerUSD / CreditsPerUSD // 2500
)

// Quota is an amount of money in the ledger's integer unit. All arithmetic on
// money inside modelgate happens on Quota; decimals appear only at the edges.
type Quota int64

var (
	quotaPerUSD    = decimal.NewFromInt(QuotaPerUSD)
	quotaPerCredit = decimal.NewFromInt(QuotaPerCredit)

	// usdPattern is the grammar of a price or amount in the contract: plain
	// non-negative decimal notation. Exponents, signs and spaces are refused so
	// that a spec field means the same thing in YAML, JSON and the database.
	usdPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// ErrInvalidAmount is returned for a money input that is not a non-negative
// decimal in plain notation, or that does not fit in a Quota.
var ErrInvalidAmount = errors.New("invalid money amount")

// ParseUSD parses a USD decimal string such as "0.002" exactly.
func ParseUSD(s string) (decimal.Decimal, error) {
	if !usdPattern.MatchString(s) {
		return decimal.Decimal{}, fmt.Errorf("%w: %q is not a plain non-negative decimal", ErrInvalidAmount, s)
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%w: %q: %v", ErrInvalidAmount, s, err)
	}
	return d, nil
}

// QuotaFromUSDString converts a USD decimal string to quota with the rounding
// rule of QuotaFromUSD.
func QuotaFromUSDString(s string) (Quota, error) {
	d, err := ParseUSD(s)
	if err != nil {
		return 0, err
	}
	return QuotaFromUSD(d)
}

// QuotaFromUSD converts an exact USD amount to quota. This is the one rounding
// rule of modelgate: the amount in quota units is rounded half up to a whole
// unit (0.5 quota → 1, 0.4999 → 0). Callers compute a charge exactly in
// decimals (price × units) and round once, here, never per component.
func QuotaFromUSD(usd decimal.Decimal) (Quota, error) {
	return roundToQuota(usd.Mul(quotaPerUSD))
}

// QuotaFromCredits converts a credit amount (exact decimal) to quota, rounding
// half up to a whole unit like QuotaFromUSD.
func QuotaFromCredits(credits decimal.Decimal) (Quota, error) {
	return roundToQuota(credits.Mul(quotaPerCredit))
}

// QuotaFromCreditsText converts a credits amount written as a plain decimal
// in a spec (a Tenant grant, an ApiToken's credits; ParseUSD's syntax) to
// quota.
func QuotaFromCreditsText(s string) (Quota, error) {
	d, err := ParseUSD(s)
	if err != nil {
		return 0, err
	}
	return QuotaFromCredits(d)
}

// QuotaFromCreditsNumber converts a credit value received as a JSON number
// (remain_credits, daily_credits, monthly_credits) to quota. It parses the
// number's text, so 0.1 means exactly one tenth and no binary float is
// involved. Decode request bodies with json.Decoder.UseNumber to get one.
func QuotaFromCreditsNumber(n json.Number) (Quota, error) {
	d, err := decimal.NewFromString(string(n))
	if err != nil {
		return 0, fmt.Errorf("%w: credits %q: %v", ErrInvalidAmount, n, err)
	}
	return QuotaFromCredits(d)
}

// QuotaFromCreditsFloat converts a credit value that already arrived as a
// float64 (the contract types remain_credits and friends as floats). The float
// is turned into the shortest decimal that round-trips to it, so 0.1 becomes
// 0.1 rather than 0.1000000000000000055…; prefer QuotaFromCreditsNumber.
func QuotaFromCreditsFloat(f float64) (Quota, error) {
	return QuotaFromCredits(decimal.NewFromFloat(f))
}

func roundToQuota(units decimal.Decimal) (Quota, error) {
	if units.IsNegative() {
		return 0, fmt.Errorf("%w: %s quota is negative", ErrInvalidAmount, units)
	}
	// Round rounds half away from zero, which for the non-negative amounts
	// accepted here is exactly "half up".
	r := units.Round(0)
	if !r.BigInt().IsInt64() {
		return 0, fmt.Errorf("%w: %s quota overflows", ErrInvalidAmount, r)
	}
	return Quota(r.IntPart()), nil
}

// USD returns the exact USD value of q (q / 500000; always a finite decimal).
func (q Quota) USD() decimal.Decimal {
	// 1/500000 = 2e-6, so a shift keeps it exact without a division.
	return decimal.NewFromInt(int64(q)).Mul(decimal.NewFromInt(2)).Shift(-6)
}

// Credits returns the exact credit value of q (q / 2500 = q × 4e-4).
func (q Quota) Credits() decimal.Decimal {
	return decimal.NewFromInt(int64(q)).Mul(decimal.NewFromInt(4)).Shift(-4)
}

// CostUSD formats q as the contract's cost_usd: the exact decimal value of
// q / 500000 with trailing zeros trimmed and no exponent ("0.5", "1",
// "0.000002", "0" for zero).
func (q Quota) CostUSD() string { return plain(q.USD(), 6) }

// CreditsString formats q in credits with the same rules as CostUSD; it is the
// billing object's credits field.
func (q Quota) CreditsString() string { return plain(q.Credits(), 4) }

// plain formats d (which has at most places fractional digits) without an
// exponent and without trailing zeros. StringFixed is used rather than String
// because String obeys the package-global decimal.UseScientificNotation.
func plain(d decimal.Decimal, places int32) string {
	s := d.StringFixed(places)
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// CreditsFloat is the credit value for fields the contract types as float
// (remain_credits, used_credits). Output only: never compute with it.
func (q Quota) CreditsFloat() float64 {
	f, _ := q.Credits().Float64()
	return f
}

// USDFloat is the USD value for float fields of the contract (remain_balance).
// Output only: never compute with it.
func (q Quota) USDFloat() float64 {
	f, _ := q.USD().Float64()
	return f
}
