package store

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/billing"
)

// TestUsageSeries: the series sums the rollup per hour or day, split by
// nothing, key or model, and only the user's own rows.
func TestUsageSeries(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		g := NewWithT(t)
		ctx := context.Background()
		s := openStore(t, dsn)
		const day0 = 20000 * 86400 // a UTC midnight
		row := func(i int, user, token int64, model string, at int64, quota billing.Quota) UsageRow {
			return UsageRow{RequestID: fmt.Sprintf("r%d", i), CreatedAt: at, UserID: user, TokenID: token, TokenName: "k",
				ModelName: model, PromptTokens: 10, CompletionTokens: 5, BillingPhase: PhaseSettled, Quota: quota}
		}
		_, err := s.InsertUsage(ctx, []UsageRow{
			row(1, 1, 11, "chat", day0+60, 100),
			row(2, 1, 11, "image", day0+120, 200),
			row(3, 1, 12, "chat", day0+3600+1, 300),
			row(4, 1, 11, "chat", day0+86400+5, 400),
			row(5, 2, 21, "chat", day0+60, 999), // another user
		})
		g.Expect(err).NotTo(HaveOccurred())

		series := func(bucket int64, split SeriesSplit) []SeriesPoint {
			out, err := s.UsageSeries(ctx, SeriesQuery{UserID: 1, Start: day0 + 30, End: day0 + 2*86400 - 30, Bucket: bucket, Split: split})
			g.Expect(err).NotTo(HaveOccurred())
			return out
		}
		g.Expect(series(BucketDay, SplitNone)).To(Equal([]SeriesPoint{
			{Bucket: day0, RequestCount: 3, Tokens: 45, Quota: 600},
			{Bucket: day0 + 86400, RequestCount: 1, Tokens: 15, Quota: 400},
		}))
		g.Expect(series(BucketDay, SplitModel)).To(Equal([]SeriesPoint{
			{Bucket: day0, Model: "chat", RequestCount: 2, Tokens: 30, Quota: 400},
			{Bucket: day0, Model: "image", RequestCount: 1, Tokens: 15, Quota: 200},
			{Bucket: day0 + 86400, Model: "chat", RequestCount: 1, Tokens: 15, Quota: 400},
		}))
		g.Expect(series(BucketHour, SplitKey)).To(Equal([]SeriesPoint{
			{Bucket: day0, TokenID: 11, RequestCount: 2, Tokens: 30, Quota: 300},
			{Bucket: day0 + 3600, TokenID: 12, RequestCount: 1, Tokens: 15, Quota: 300},
			{Bucket: day0 + 86400, TokenID: 11, RequestCount: 1, Tokens: 15, Quota: 400},
		}))

		for name, q := range map[string]SeriesQuery{
			"hourly over 8 days": {UserID: 1, Start: day0, End: day0 + 8*86400, Bucket: BucketHour},
			"daily over 40 days": {UserID: 1, Start: day0, End: day0 + 40*86400, Bucket: BucketDay},
			"a minute bucket":    {UserID: 1, Start: day0, End: day0 + 86400, Bucket: 60},
			"an unknown split":   {UserID: 1, Start: day0, End: day0 + 86400, Bucket: BucketDay, Split: "colour"},
			"an empty window":    {UserID: 1, Start: day0, End: day0, Bucket: BucketDay},
		} {
			_, err := s.UsageSeries(ctx, q)
			g.Expect(err).To(MatchError(ErrInvalidQuery), name)
		}
	})
}
