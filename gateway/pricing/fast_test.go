package pricing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
)

// The fixed-point path of Charge must give exactly the decimal result, and
// fall back to decimals when a value does not fit.
func TestFastPathEqualsDecimal(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(1, 2))
	price := func() string {
		switch rng.IntN(10) {
		case 0, 1, 2:
			return fmt.Sprint(rng.IntN(100))
		case 3, 4, 5:
			return fmt.Sprintf("%d.%03d", rng.IntN(10), rng.IntN(1000))
		case 6, 7, 8:
			return fmt.Sprintf("0.%012d", rng.Int64N(1_000_000_000_000)) // 12 decimals
		}
		return fmt.Sprintf("%d.%06d", rng.Int64N(1_000_000_000_000_000), rng.IntN(1_000_000)) // huge
	}
	qty := func() int64 {
		switch rng.IntN(12) {
		case 0:
			return 0
		case 1:
			return rng.Int64N(math.MaxInt64) // overflows the fixed-point path
		}
		return rng.Int64N(5_000_000)
	}
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	fast, slow := 0, 0
	for i := 0; i < 3000; i++ {
		var spec v1.PriceRuleSpec
		switch i % 4 {
		case 0:
			spec = perRequest("m", price())
			spec.InputImageUnitPrice = dec(price())
			spec.FreeInputImageCount = i32(int32(rng.IntN(3)))
		case 1:
			spec = perSecond("m", price())
			spec.InputUnitPrice = dec(price())
		case 2:
			spec = perToken("m", "total_tokens", price())
		case 3:
			spec = perToken("m", "text_input_tokens", price())
			spec.OutputUnitPrice = dec(price())
			spec.CacheReadUnitPrice = dec(price())
			spec.ImageTokenPrices = &v1.ImageTokenPrices{ImageInput: dec(price()), ImageOutput: dec(price())}
		}
		if rng.IntN(2) == 0 {
			spec.GroupRatio = dec(price())
		}
		if rng.IntN(2) == 0 {
			spec.MinimumChargeUSD = dec(price())
		}
		if rng.IntN(2) == 0 {
			spec.Timezone = "UTC"
			spec.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "12:00", Multiplier: dec(price())}}
		}
		r := mustCompile(t, spec)
		in := qty()
		u := Usage{
			Requests: qty() % 16, InputImages: qty() % 16, OutputSeconds: qty(), InputVideoSeconds: qty(),
			InputTextTokens: in, CachedTextTokens: in / 3, CacheWriteTokens: in / 4,
			InputImageTokens: in / 2, CachedImageTokens: in / 5,
			OutputTextTokens: qty(), OutputImageTokens: qty(), Failed: rng.IntN(3) == 0,
		}
		got, gotErr := r.Charge(u, at)
		want, wantErr := r.chargeDecimal(&u, at)
		g.Expect(got).To(Equal(want), "%+v %+v", spec, u)
		g.Expect(gotErr == nil).To(Equal(wantErr == nil), "%v %v", gotErr, wantErr)
		p, _ := r.pricesAt(at)
		if _, ok := r.chargeFast(&p.fast, &u); ok {
			fast++
		} else {
			slow++
		}
	}
	t.Logf("fixed point %d, decimal fallback %d", fast, slow)
	g.Expect(fast).To(BeNumerically(">", 300), "the fixed-point path is exercised")
	g.Expect(slow).To(BeNumerically(">", 50), "the fallback is exercised")
}

func BenchmarkChargeDecimal(b *testing.B) {
	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	text.CacheReadUnitPrice = dec("0.3")
	pr := published(sysNS, "bench", 0, text)
	r, err := Compile(&pr, sysNS)
	if err != nil {
		b.Fatal(err)
	}
	u := Usage{InputTextTokens: 12000, CachedTextTokens: 8000, OutputTextTokens: 700}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.chargeDecimal(&u, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTableSelect(b *testing.B) {
	var rules []v1.PriceRule
	for i := 0; i < 200; i++ {
		m := fmt.Sprintf("m-%d", i)
		rules = append(rules,
			published(sysNS, m, 0, perSecond(m, "0.01")),
			published(sysNS, m+"-hd", 0, withCond(perSecond(m, "0.02"), res("1080p"))),
			published("tenant", m, 0, withCond(perSecond(m, "0.015"), res("1080p"))),
		)
	}
	table := NewTable(sysNS, rules)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := table.Select("tenant", "m-42", "default", Facts{Resolution: "1080p"}); err != nil {
			b.Fatal(err)
		}
	}
}
