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

// Simulated token usage: what the simulated backend reports per request,
// so token-priced models can be served and billed end to end in dev.
const (
	SimulatedImageOutputTokens = 1056 // one 1024x1024 image at medium quality, as gpt-image-1 reports it
	SimulatedImageInputTokens  = 258  // one reference image
)

// SimulatedUsage is the deterministic usage of a simulated image task:
// a token per 4 prompt bytes (at least 1), SimulatedImageInputTokens per
// reference image and SimulatedImageOutputTokens per output.
func SimulatedUsage(promptBytes, references, outputs int64) *v1.ImageTokenUsage {
	text := max((promptBytes+3)/4, 1)
	image := references * SimulatedImageInputTokens
	out := outputs * SimulatedImageOutputTokens
	return &v1.ImageTokenUsage{
		InputTokens: text + image, OutputTokens: out, TotalTokens: text + image + out,
		InputTokensDetails:  &v1.InputTokenDetails{TokenCountDetails: v1.TokenCountDetails{TextTokens: text, ImageTokens: image}},
		OutputTokensDetails: &v1.TokenCountDetails{ImageTokens: out},
	}
}
