package pricing

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/shopspring/decimal"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/billing"
)

func TestChargeFormulas(t *testing.T) {
	// The contract's worked numbers of the single-image family: 0.03 USD per
	// successful output request, 0.003 USD per reference image, no free
	// allowance.
	contractImage := perRequest("img", "0.03")
	contractImage.InputImageUnitPrice = dec("0.003")

	freeImages := contractImage
	freeImages.FreeInputImageCount = i32(2)

	video := perSecond("vid", "0.1")
	videoInput := perSecond("vid", "0.1")
	videoInput.InputUnitPrice = dec("0.05")

	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	text.CacheReadUnitPrice = dec("0.3")
	text.CacheWriteUnitPrice = dec("3.75")

	textNoOutput := perToken("chat", "text_input_tokens", "2")
	textNoCache := perToken("chat", "text_input_tokens", "3")
	textNoCache.OutputUnitPrice = dec("15")

	total := perToken("chat", "total_tokens", "2")

	imageTokens := perToken("gpt-image", "text_input_tokens", "5")
	imageTokens.ImageTokenPrices = &v1.ImageTokenPrices{
		TextInput: dec("5"), CachedTextInput: dec("1.25"), ImageInput: dec("10"),
		CachedImageInput: dec("2.5"), ImageOutput: dec("40"),
	}
	imageTokensPartial := perToken("gpt-image", "text_input_tokens", "5")
	imageTokensPartial.OutputUnitPrice = dec("20")
	imageTokensPartial.ImageTokenPrices = &v1.ImageTokenPrices{ImageInput: dec("10")}

	halfUp := perToken("chat", "text_input_tokens", "1")           // 1 token = 0.5 quota
	belowHalf := perToken("chat", "text_input_tokens", "0.999999") // 1 token = 0.4999995 quota
	oneRounding := perToken("chat", "text_input_tokens", "0.8")    // 1 token = 0.4 quota
	oneRounding.OutputUnitPrice = dec("0.8")                       // + 0.4 quota = 0.8 → 1
	minimum := perToken("chat", "text_input_tokens", "1")          // 1000 tokens = 0.001 USD
	minimum.MinimumChargeUSD = dec("0.01")                         // floor 5000 quota
	ratio := perRequest("img", "0.03")                             // × 1.5 = 0.045
	ratio.GroupRatio = dec("1.5")
	ratioMin := perToken("chat", "text_input_tokens", "1")
	ratioMin.GroupRatio = dec("0.5")
	ratioMin.MinimumChargeUSD = dec("0.01") // effective 0.005 USD = 2500 quota

	tests := []struct {
		name string
		spec v1.PriceRuleSpec
		use  Usage
		want billing.Quota
	}{
		{"per_request contract: 1 output, no reference", contractImage, Usage{Requests: 1}, 15000},
		{"per_request contract: 1 output, 3 references", contractImage, Usage{Requests: 1, InputImages: 3}, 19500},
		{"per_request free images: 3 references, 2 free", freeImages, Usage{Requests: 1, InputImages: 3}, 16500},
		{"per_request free images: fewer references than free", freeImages, Usage{Requests: 1, InputImages: 1}, 15000},
		{"per_request n outputs: (0.03 + 2×0.003) × 4", contractImage, Usage{Requests: 4, InputImages: 2}, 72000},
		{"per_request no successful output", contractImage, Usage{Requests: 0, InputImages: 2}, 0},
		{"per_second: 5 s × 0.1", video, Usage{OutputSeconds: 5}, 250000},
		{"per_second input video without input price is free", video, Usage{OutputSeconds: 5, InputVideoSeconds: 3}, 250000},
		{"per_second input video: 5 × 0.1 + 3 × 0.05", videoInput, Usage{OutputSeconds: 5, InputVideoSeconds: 3}, 325000},
		{"per_token text: 1000 in × 3 + 500 out × 15", text, Usage{InputTextTokens: 1000, OutputTextTokens: 500}, 5250},
		{"per_token text output falls back to unitPrice", textNoOutput, Usage{InputTextTokens: 1000, OutputTextTokens: 500}, 1500},
		// 5000 uncached × 3 + 4000 read × 0.3 + 1000 written × 3.75 + 200 out × 15
		// = 0.015 + 0.0012 + 0.00375 + 0.003 = 0.02295 USD
		{"per_token cache read and write are a subset of input", text,
			Usage{InputTextTokens: 10000, CachedTextTokens: 4000, CacheWriteTokens: 1000, OutputTextTokens: 200}, 11475},
		{"per_token cache without cache price costs the input price", textNoCache,
			Usage{InputTextTokens: 10000, CachedTextTokens: 4000, OutputTextTokens: 200}, 16500},
		{"per_token total_tokens: (1000 + 500) × 2", total, Usage{InputTextTokens: 1000, OutputTextTokens: 500}, 1500},
		{"per_token total_tokens counts image tokens and ignores cache split", total,
			Usage{InputTextTokens: 1000, CachedTextTokens: 1000, InputImageTokens: 500, OutputImageTokens: 500}, 2000},
		// 80×5 + 20×1.25 + 800×10 + 200×2.5 + 4000×40 = 168925 per 1M
		// = 0.168925 USD = 84462.5 quota → 84463 (half up, once)
		{"image token prices, rounding at the half", imageTokens,
			Usage{InputTextTokens: 100, CachedTextTokens: 20, InputImageTokens: 1000, CachedImageTokens: 200, OutputImageTokens: 4000}, 84463},
		// text 100×5, image in 1000×10 (cached falls back to image input),
		// image out 1000 × 20 (falls back to outputUnitPrice), text out 100 × 20
		// = 500 + 10000 + 20000 + 2000 = 32500 per 1M = 16250 quota
		{"image token fallbacks", imageTokensPartial,
			Usage{InputTextTokens: 100, InputImageTokens: 1000, CachedImageTokens: 100, OutputImageTokens: 1000, OutputTextTokens: 100}, 16250},
		{"rounding: exactly half a quota rounds up", halfUp, Usage{InputTextTokens: 1}, 1},
		{"rounding: just below half rounds down", belowHalf, Usage{InputTextTokens: 1}, 0},
		{"rounding happens once, not per component", oneRounding, Usage{InputTextTokens: 1, OutputTextTokens: 1}, 1},
		{"minimum charge floors a successful request", minimum, Usage{InputTextTokens: 1000}, 5000},
		{"minimum charge does not apply to a failed request", minimum, Usage{InputTextTokens: 1000, Failed: true}, 500},
		{"minimum charge below the usage changes nothing", minimum, Usage{InputTextTokens: 20000}, 10000},
		{"minimum charge applies to a successful request with no usage", minimum, Usage{}, 5000},
		{"group ratio multiplies the price", ratio, Usage{Requests: 1}, 22500},
		{"group ratio multiplies the minimum charge", ratioMin, Usage{InputTextTokens: 1000}, 2500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustCompile(t, tc.spec)
			got, err := r.Charge(tc.use, t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			q, err := r.Quote(tc.use, t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(q.Quota).To(Equal(tc.want), "Quote and Charge agree")
			sum := decimal.Zero
			for _, l := range q.Lines {
				sum = sum.Add(l.AmountUSD)
			}
			g.Expect(sum.Equal(q.TotalUSD)).To(BeTrue(), "lines add up to the total")
		})
	}
}

func TestQuoteBreakdown(t *testing.T) {
	g := NewWithT(t)
	spec := perRequest("img", "0.03")
	spec.InputImageUnitPrice = dec("0.003")
	spec.FreeInputImageCount = i32(1)
	spec.GroupRatio = dec("2")
	spec.MinimumChargeUSD = dec("0.1")
	r := mustCompile(t, spec)
	b, err := r.Quote(Usage{Requests: 1, InputImages: 3}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Rule).To(Equal(sysNS + "/r"))
	g.Expect(b.PeakWindow).To(Equal(-1))
	g.Expect(b.Lines).To(HaveLen(3))
	g.Expect(b.Lines[0].Item).To(Equal("requests"))
	g.Expect(b.Lines[0].UnitPriceUSD.String()).To(Equal("0.06"))
	g.Expect(b.Lines[1].Item).To(Equal("input_images"))
	g.Expect(b.Lines[1].Quantity).To(Equal(int64(2)))
	g.Expect(b.Lines[1].AmountUSD.String()).To(Equal("0.012"))
	g.Expect(b.Lines[2].Item).To(Equal("minimum_charge"))
	g.Expect(b.SubtotalUSD.String()).To(Equal("0.072"))
	g.Expect(b.MinimumApplied).To(BeTrue())
	g.Expect(b.TotalUSD.String()).To(Equal("0.2"))
	g.Expect(b.Quota).To(Equal(billing.Quota(100000)))
}

func TestChargeRejectsInvalidUsage(t *testing.T) {
	text := perToken("chat", "text_input_tokens", "3")
	for name, u := range map[string]Usage{
		"negative":                      {InputTextTokens: -1},
		"cached over input":             {InputTextTokens: 10, CachedTextTokens: 11},
		"cache read + write over input": {InputTextTokens: 10, CachedTextTokens: 6, CacheWriteTokens: 6},
		"cached image over image input": {InputImageTokens: 10, CachedImageTokens: 11},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := mustCompile(t, text).Charge(u, t0)
			NewWithT(t).Expect(err).To(MatchError(ErrInvalidUsage))
		})
	}
}

func TestEstimate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(EstimateInputTokens(0)).To(BeZero())
	g.Expect(EstimateInputTokens(1)).To(Equal(int64(1)))
	g.Expect(EstimateInputTokens(3000)).To(Equal(int64(1000)))
	g.Expect(EstimateInputTokens(3001)).To(Equal(int64(1001)))

	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	text.CacheReadUnitPrice = dec("0.3")
	// 3000 bytes → 1000 tokens × 3 + 4096 × 15 = 0.003 + 0.06144 USD
	q, err := mustCompile(t, text).EstimateText(3000, 4096, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(32220)))

	perReq := perRequest("chat-call", "0.01")
	q, err = mustCompile(t, perReq).EstimateText(3000, 4096, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(5000)))

	img := perRequest("img", "0.03")
	img.InputImageUnitPrice = dec("0.003")
	q, err = mustCompile(t, img).EstimateMedia(MediaRequest{Outputs: 4, InputImages: 2}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(72000)))
	q, err = mustCompile(t, img).EstimateMedia(MediaRequest{}, t0) // n defaults to 1
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(15000)))

	vid := perSecond("vid", "0.05")
	q, err = mustCompile(t, vid).EstimateMedia(MediaRequest{DurationSeconds: 5}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(125000)))
	_, err = mustCompile(t, vid).EstimateMedia(MediaRequest{DurationSeconds: -1}, t0)
	g.Expect(err).To(MatchError(ErrInvalidUsage))

	// per_token images: prompt bytes as text tokens, budgets per reference and output image.
	gpt := perToken("gpt-image", "text_input_tokens", "5")
	gpt.ImageTokenPrices = &v1.ImageTokenPrices{TextInput: dec("5"), ImageInput: dec("10"), ImageOutput: dec("40")}
	q, err = mustCompile(t, gpt).EstimateMedia(MediaRequest{Outputs: 2, InputImages: 1, PromptBytes: 1000}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	// 1000 × 5 + 6240 × 10 + 2 × 6240 × 40 = 566 600 USD per 1M tokens = 0.5666 USD
	g.Expect(q).To(Equal(billing.Quota(283300)))
	_, err = mustCompile(t, gpt).EstimateMedia(MediaRequest{DurationSeconds: 5}, t0)
	g.Expect(err).To(MatchError(ErrCannotEstimate), "a token-priced video needs its size")

	// per_token video: width × height × 24 fps × seconds / 1024 output
	// tokens, sides rounded up to multiples of 32 (720 → 736), plus the
	// prompt's bytes.
	g.Expect(VideoTokens(1280, 720, 5)).To(Equal(int64(110400)))
	g.Expect(VideoTokens(1920, 1080, 1)).To(Equal(int64(48960)), "1920x1088 × 24 / 1024")
	g.Expect(VideoTokens(1111, 833, 1)).To(Equal(int64(22680)), "1120x864 × 24 / 1024")
	seedance := perToken("seedance", "total_tokens", "2.5")
	q, err = mustCompile(t, seedance).EstimateMedia(MediaRequest{DurationSeconds: 5, VideoWidth: 1280, VideoHeight: 720, PromptBytes: 100}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	// (110 400 + 100) × 2.5 / 1M = 0.27625 USD
	g.Expect(q).To(Equal(billing.Quota(138125)))
	q, err = mustCompile(t, seedance).EstimateMedia(MediaRequest{DurationSeconds: 5, InputVideoSeconds: 5, VideoWidth: 1280, VideoHeight: 720, PromptBytes: 100}, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(q).To(Equal(billing.Quota(276125)), "input video seconds count at the output size")
}

func TestPeakWindows(t *testing.T) {
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return tm
	}
	// Shanghai has no DST: local = UTC+8. 2026-03-02 is a Monday.
	weekday := perRequest("img", "0.02")
	weekday.Timezone = "Asia/Shanghai"
	weekday.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "09:00", End: "18:00", Multiplier: dec("1.5")}}

	night := perRequest("img", "0.02")
	night.Timezone = "Asia/Shanghai"
	night.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Fri"}, Start: "22:00", End: "06:00", UnitPrice: dec("0.05")}}

	// New York: DST starts 2026-03-08 02:00 EST → 03:00 EDT, ends 2026-11-01 02:00 EDT → 01:00 EST.
	nyOffice := perRequest("img", "0.02")
	nyOffice.Timezone = "America/New_York"
	nyOffice.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "17:00", Multiplier: dec("2")}}
	nyGap := perRequest("img", "0.02")
	nyGap.Timezone = "America/New_York"
	nyGap.PeakWindows = []v1.PeakWindow{{Start: "01:30", End: "03:30", Multiplier: dec("2")}}
	nyFold := perRequest("img", "0.02")
	nyFold.Timezone = "America/New_York"
	nyFold.PeakWindows = []v1.PeakWindow{{Start: "01:00", End: "02:00", Multiplier: dec("2")}}

	withRatio := night
	withRatio.GroupRatio = dec("2")

	first := perRequest("img", "0.02")
	first.Timezone = "UTC"
	first.PeakWindows = []v1.PeakWindow{
		{Start: "10:00", End: "12:00", Multiplier: dec("3")},
		{Start: "09:00", End: "18:00", Multiplier: dec("2")},
	}

	tests := []struct {
		name string
		spec v1.PriceRuleSpec
		at   string
		want billing.Quota // 0.02 USD = 10000 off-peak
	}{
		{"weekday window: Monday 10:00 local", weekday, "2026-03-02T02:00:00Z", 15000},
		{"weekday window: start is inclusive", weekday, "2026-03-02T01:00:00Z", 15000},
		{"weekday window: 08:59 is off-peak", weekday, "2026-03-02T00:59:00Z", 10000},
		{"weekday window: end is exclusive", weekday, "2026-03-02T10:00:00Z", 10000},
		{"weekday window: Saturday 10:00 is off-peak", weekday, "2026-03-07T02:00:00Z", 10000},
		{"weekday window: Monday local while still Sunday in UTC", weekday, "2026-03-01T17:30:00Z", 10000},
		{"midnight: Friday 23:00", night, "2026-03-06T15:00:00Z", 25000},
		{"midnight: Saturday 05:59 belongs to Friday's window", night, "2026-03-06T21:59:00Z", 25000},
		{"midnight: Saturday 06:00 is off-peak", night, "2026-03-06T22:00:00Z", 10000},
		{"midnight: Thursday 23:00 is off-peak", night, "2026-03-05T15:00:00Z", 10000},
		{"midnight: Friday 05:00 belongs to Thursday", night, "2026-03-05T21:00:00Z", 10000},
		{"absolute peak price includes the group ratio", withRatio, "2026-03-06T15:00:00Z", 50000},
		{"absolute peak: off-peak includes the group ratio", withRatio, "2026-03-06T22:00:00Z", 20000},
		{"DST: 09:30 EST the day before", nyOffice, "2026-03-07T14:30:00Z", 20000},
		{"DST: 08:30 EST the day before", nyOffice, "2026-03-07T13:30:00Z", 10000},
		{"DST: 09:30 EDT on the change day (13:30 UTC)", nyOffice, "2026-03-08T13:30:00Z", 20000},
		{"DST: 16:59 EDT on the change day", nyOffice, "2026-03-08T20:59:00Z", 20000},
		{"DST: 17:00 EDT on the change day", nyOffice, "2026-03-08T21:00:00Z", 10000},
		{"DST gap: 01:45 EST", nyGap, "2026-03-08T06:45:00Z", 20000},
		{"DST gap: 03:15 EDT, right after the skipped hour", nyGap, "2026-03-08T07:15:00Z", 20000},
		{"DST gap: 03:30 EDT", nyGap, "2026-03-08T07:30:00Z", 10000},
		{"DST fold: first 01:30 (EDT)", nyFold, "2026-11-01T05:30:00Z", 20000},
		{"DST fold: second 01:30 (EST)", nyFold, "2026-11-01T06:30:00Z", 20000},
		{"DST fold: 02:00 EST", nyFold, "2026-11-01T07:00:00Z", 10000},
		{"overlapping windows: the first listed wins", first, "2026-03-02T11:00:00Z", 30000},
		{"overlapping windows: the second outside the first", first, "2026-03-02T13:00:00Z", 20000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := mustCompile(t, tc.spec).Charge(Usage{Requests: 1}, utc(tc.at))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestPeakMultiplierVersusAbsolutePrice(t *testing.T) {
	g := NewWithT(t)
	peak := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	off := time.Date(2026, 3, 2, 20, 0, 0, 0, time.UTC)
	u := Usage{InputTextTokens: 1_000_000, OutputTextTokens: 1_000_000}

	mult := perToken("chat", "text_input_tokens", "1")
	mult.OutputUnitPrice = dec("4")
	mult.MinimumChargeUSD = dec("1")
	mult.Timezone = "UTC"
	mult.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "18:00", Multiplier: dec("2")}}
	r := mustCompile(t, mult)
	// Off-peak: 1 + 4 = 5 USD. Peak: the multiplier scales every price: 2 + 8.
	g.Expect(r.Charge(u, off)).To(Equal(billing.Quota(2_500_000)))
	g.Expect(r.Charge(u, peak)).To(Equal(billing.Quota(5_000_000)))
	b, _ := r.Quote(u, peak)
	g.Expect(b.PeakWindow).To(Equal(0))
	// The minimum charge is not scaled.
	g.Expect(r.Charge(Usage{InputTextTokens: 1}, peak)).To(Equal(billing.Quota(500_000)))

	abs := mult
	abs.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "18:00", UnitPrice: dec("3")}}
	r = mustCompile(t, abs)
	// The absolute price replaces unitPrice only: 3 + 4.
	g.Expect(r.Charge(u, peak)).To(Equal(billing.Quota(3_500_000)))

	absFallback := perToken("chat", "text_input_tokens", "1")
	absFallback.Timezone = "UTC"
	absFallback.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "18:00", UnitPrice: dec("3")}}
	// Output falls back to unitPrice, so it follows the peak price: 3 + 3.
	g.Expect(mustCompile(t, absFallback).Charge(u, peak)).To(Equal(billing.Quota(3_000_000)))
}

func TestValidateSpec(t *testing.T) {
	ok := perRequest("img", "0.03")
	mod := func(f func(s *v1.PriceRuleSpec)) v1.PriceRuleSpec {
		s := ok
		f(&s)
		return s
	}
	bad := map[string]v1.PriceRuleSpec{
		"unit price with exponent":    mod(func(s *v1.PriceRuleSpec) { s.UnitPrice = "3e-2" }),
		"negative unit price":         mod(func(s *v1.PriceRuleSpec) { s.UnitPrice = "-1" }),
		"empty unit price":            mod(func(s *v1.PriceRuleSpec) { s.UnitPrice = "" }),
		"bad group ratio":             mod(func(s *v1.PriceRuleSpec) { s.GroupRatio = dec("1,5") }),
		"bad minimum":                 mod(func(s *v1.PriceRuleSpec) { s.MinimumChargeUSD = dec("x") }),
		"per_request with seconds":    mod(func(s *v1.PriceRuleSpec) { s.Unit = v1.UnitSecond }),
		"per_second with request":     mod(func(s *v1.PriceRuleSpec) { s.ChargeType = v1.ChargePerSecond }),
		"unknown charge type":         mod(func(s *v1.PriceRuleSpec) { s.ChargeType = "per_day" }),
		"output price on per_request": mod(func(s *v1.PriceRuleSpec) { s.OutputUnitPrice = dec("1") }),
		"input price on per_request":  mod(func(s *v1.PriceRuleSpec) { s.InputUnitPrice = dec("1") }),
		"image tokens on per_request": mod(func(s *v1.PriceRuleSpec) {
			s.ImageTokenPrices = &v1.ImageTokenPrices{TextInput: dec("1")}
		}),
		"input image price on per_second": func() v1.PriceRuleSpec {
			s := perSecond("v", "1")
			s.InputImageUnitPrice = dec("1")
			return s
		}(),
		"cache price on total_tokens": func() v1.PriceRuleSpec {
			s := perToken("c", "total_tokens", "1")
			s.CacheReadUnitPrice = dec("1")
			return s
		}(),
		"bad image token price": func() v1.PriceRuleSpec {
			s := perToken("c", "text_input_tokens", "1")
			s.ImageTokenPrices = &v1.ImageTokenPrices{ImageOutput: dec("abc")}
			return s
		}(),
		"windows without timezone": mod(func(s *v1.PriceRuleSpec) {
			s.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "10:00", Multiplier: dec("2")}}
		}),
		"unknown timezone": mod(func(s *v1.PriceRuleSpec) { s.Timezone = "Mars/Olympus" }),
		"window bad time": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "UTC"
			s.PeakWindows = []v1.PeakWindow{{Start: "24:00", End: "10:00", Multiplier: dec("2")}}
		}),
		"window start equals end": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "UTC"
			s.PeakWindows = []v1.PeakWindow{{Start: "10:00", End: "10:00", Multiplier: dec("2")}}
		}),
		"window bad day": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "UTC"
			s.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Monday"}, Start: "09:00", End: "10:00", Multiplier: dec("2")}}
		}),
		"window with both prices": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "UTC"
			s.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "10:00", Multiplier: dec("2"), UnitPrice: dec("1")}}
		}),
		"window with no price": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "UTC"
			s.PeakWindows = []v1.PeakWindow{{Start: "09:00", End: "10:00"}}
		}),
	}
	for name, spec := range bad {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(ValidateSpec(&spec)).To(MatchError(ErrInvalidRule))
		})
	}
	good := map[string]v1.PriceRuleSpec{
		"plain":       ok,
		"integer":     mod(func(s *v1.PriceRuleSpec) { s.UnitPrice = "12" }),
		"zero":        mod(func(s *v1.PriceRuleSpec) { s.UnitPrice = "0" }),
		"free images": mod(func(s *v1.PriceRuleSpec) { s.InputImageUnitPrice = dec("0.003"); s.FreeInputImageCount = i32(2) }),
		"peak windows": mod(func(s *v1.PriceRuleSpec) {
			s.Timezone = "Europe/Berlin"
			s.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Sat", "Sun"}, Start: "20:00", End: "02:00", UnitPrice: dec("0.05")}}
		}),
		"video input price": func() v1.PriceRuleSpec {
			s := perSecond("v", "1")
			s.InputUnitPrice = dec("0.5")
			return s
		}(),
	}
	for name, spec := range good {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(ValidateSpec(&spec)).To(Succeed())
		})
	}
}

func TestFormatDecimal(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"0": "0", "0.000": "0", "0.030": "0.03", "1.50": "1.5", "12": "12", "2E3": "2000",
		"1e-9": "0.000000001", "100": "100", "0.000001": "0.000001",
	} {
		d, err := decimal.NewFromString(in)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(FormatDecimal(d)).To(Equal(want), in)
	}
}

func BenchmarkCharge(b *testing.B) {
	text := perToken("chat", "text_input_tokens", "3")
	text.OutputUnitPrice = dec("15")
	text.CacheReadUnitPrice = dec("0.3")
	text.GroupRatio = dec("1.2")
	text.Timezone = "America/New_York"
	text.PeakWindows = []v1.PeakWindow{{Days: []v1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "09:00", End: "18:00", Multiplier: dec("1.5")}}
	pr := published(sysNS, "bench", 0, text)
	r, err := Compile(&pr, sysNS)
	if err != nil {
		b.Fatal(err)
	}
	img := perRequest("img", "0.03")
	img.InputImageUnitPrice = dec("0.003")
	pi := published(sysNS, "bench-img", 0, img)
	ri, err := Compile(&pi, sysNS)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
	b.Run("per_token", func(b *testing.B) {
		u := Usage{InputTextTokens: 12000, CachedTextTokens: 8000, OutputTextTokens: 700}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Charge(u, at); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("per_request", func(b *testing.B) {
		u := Usage{Requests: 1, InputImages: 2}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ri.Charge(u, at); err != nil {
				b.Fatal(err)
			}
		}
	})
}
