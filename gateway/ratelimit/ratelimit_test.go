package ratelimit

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBurstThenRefill(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	l := &Limiter{Clock: clk}
	for range 3 {
		ok, _ := l.Allow(Tenant("t"), 3)
		g.Expect(ok).To(BeTrue())
	}
	ok, wait := l.Allow(Tenant("t"), 3)
	g.Expect(ok).To(BeFalse())
	g.Expect(wait).To(BeNumerically("~", 20*time.Second, time.Second))
	ok, _ = l.Allow(Tenant("other"), 3)
	g.Expect(ok).To(BeTrue(), "buckets are per key")

	clk.SetTime(clk.Now().Add(20 * time.Second))
	ok, _ = l.Allow(Tenant("t"), 3)
	g.Expect(ok).To(BeTrue(), "one request refilled after 20 s")
}

func TestDefaultsAndUnlimited(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	l := &Limiter{Clock: clk}
	for range 1000 {
		ok, _ := l.Allow(Tenant("t"), 0)
		g.Expect(ok).To(BeTrue(), "no default: unlimited")
	}
	l = &Limiter{Clock: clk, DefaultPerMinute: 1}
	ok, _ := l.Allow(Tenant("t"), 0)
	g.Expect(ok).To(BeTrue())
	ok, _ = l.Allow(Tenant("t"), 0)
	g.Expect(ok).To(BeFalse())
	l.Prune(time.Minute)
	g.Expect(l.buckets).To(HaveLen(1))
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	l.Prune(time.Minute)
	g.Expect(l.buckets).To(BeEmpty())
}

func TestTokensPerMinuteGoIntoDebtAfterTheFact(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	l := &Limiter{Clock: clk}
	ok, _ := l.TokensAvailable(Tenant("t"), 600) // 10 tokens per second
	g.Expect(ok).To(BeTrue())
	l.ChargeTokens(Tenant("t"), 600, 900) // more than the bucket: capped at one minute's worth
	ok, wait := l.TokensAvailable(Tenant("t"), 600)
	g.Expect(ok).To(BeFalse())
	g.Expect(wait).To(BeNumerically("~", 100*time.Millisecond, 20*time.Millisecond))
	clk.SetTime(clk.Now().Add(time.Second))
	ok, _ = l.TokensAvailable(Tenant("t"), 600)
	g.Expect(ok).To(BeTrue(), "a second later the debt is repaid")
	ok, _ = l.TokensAvailable(Tenant("t"), 0)
	g.Expect(ok).To(BeTrue(), "no limit")
}

// A tenant with both a request and a token limit keeps both buckets, and a
// key's buckets are not its tenant's (one bucket per key would be recreated
// on every alternating call and never limit).
func TestRequestAndTokenBucketsAreSeparate(t *testing.T) {
	g := NewWithT(t)
	l := &Limiter{Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0))}
	for range 2 {
		ok, _ := l.Allow(Tenant("t"), 2)
		g.Expect(ok).To(BeTrue())
		ok, _ = l.TokensAvailable(Tenant("t"), 600)
		g.Expect(ok).To(BeTrue())
	}
	ok, _ := l.Allow(Tenant("t"), 2)
	g.Expect(ok).To(BeFalse(), "the request bucket kept its count across token checks")
	ok, _ = l.Allow(Token("t", "key"), 2)
	g.Expect(ok).To(BeTrue(), "a key's requests have their own bucket")
}
