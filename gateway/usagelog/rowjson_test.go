package usagelog

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/store"
)

// The journal's hand-written row encoder writes what encoding/json writes
// (the replay decodes records with it): every member, every omitempty case,
// and strings that need escaping, HTML-escaping or UTF-8 repair.
func TestAppendRowMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "k", "req_0193a1b2c3d4e5f6a7b8c9d0", "my \"key\"", `back\slash`, "tab\there", "line\nbreak",
		"<script>&", "ünïcødé ✓", "emoji 🙂", "\x00\x1f\x7f", "bad \xff utf-8", "\u2028\u2029", "ns/route/backend-1"}
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []int64) int64 { return xs[rng.IntN(len(xs))] }
	str := func() string { return strs[rng.IntN(len(strs))] }
	opt := func() *int64 {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := pick(ints)
		return &v
	}
	for i := range 2000 {
		r := store.UsageRow{RequestID: str(), CreatedAt: pick(ints), UserID: pick(ints), TokenID: pick(ints),
			TokenName: str(), ModelName: str(), TaskID: str(), PromptTokens: pick(ints), CompletionTokens: pick(ints),
			CacheTokens: opt(), CacheCreationTokens: opt(), ReportedTotalTokens: opt(), BillingPhase: str(),
			Quota: billing.Quota(pick(ints)), Backend: str(),
			Charge: store.Charge{Apply: rng.IntN(2) == 0, LeaseID: pick(ints)}}
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendRow(nil, &r); string(got) != string(want) {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// BenchmarkAppendRow is the journal's encoding of one row, against
// encoding/json's.
//
//	go test -run '^$' -bench AppendRow ./gateway/usagelog/
func BenchmarkAppendRow(b *testing.B) {
	cache := int64(7)
	r := store.UsageRow{RequestID: store.NewRequestID(), CreatedAt: 1_780_000_000, UserID: 3, TokenID: 1234, TokenName: "ci key",
		ModelName: "gpt-4o-mini", PromptTokens: 120, CompletionTokens: 80, CacheTokens: &cache, BillingPhase: store.PhaseSettled,
		Quota: 1500, Backend: "team-a/chat/primary", Charge: store.Charge{Apply: true, LeaseID: 99}}
	b.Run("appendRow", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = appendRow(buf[:0], &r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
