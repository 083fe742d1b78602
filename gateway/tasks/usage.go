package tasks

import (
	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/pricing"
)

// PricingUsage is the evaluator's view of an image model's token usage.
// Cached tokens without a split count as text (image models cache prompts).
func PricingUsage(u *v1.ImageTokenUsage) pricing.Usage {
	out := pricing.Usage{InputTextTokens: u.InputTokens, OutputImageTokens: u.OutputTokens}
	if d := u.InputTokensDetails; d != nil {
		out.InputTextTokens, out.InputImageTokens = d.TextTokens, d.ImageTokens
		if c := d.CachedTokensDetails; c != nil {
			out.CachedTextTokens, out.CachedImageTokens = c.TextTokens, c.ImageTokens
		} else {
			out.CachedTextTokens = min(d.CachedTokens, out.InputTextTokens)
		}
	}
	if d := u.OutputTokensDetails; d != nil {
		out.OutputTextTokens, out.OutputImageTokens = d.TextTokens, d.ImageTokens
	}
	return out
}
