package translate

import "testing"

// The usual shapes of OpenAI's usage object are read by the walk, not
// handed to the decoder (FuzzChatUsageMatchesDecoder checks that the two
// agree; this checks that the walk is the one that answers).
func TestChatUsageWalksTheUsualShape(t *testing.T) {
	for _, tc := range []struct {
		raw                       string
		prompt, completion, total int64
		cached                    *int64
		reasoning                 int64
	}{
		{raw: `{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}`, prompt: 12, completion: 30, total: 42},
		{raw: `{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},` +
			`"completion_tokens_details":{"reasoning_tokens":8,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			prompt: 19, completion: 10, total: 29, cached: ptr(int64(4)), reasoning: 8},
	} {
		var u chatUsage
		if !walkChatUsage([]byte(tc.raw), &u) {
			t.Fatalf("the walk handed %s to the decoder", tc.raw)
		}
		got := u.toUsage()
		if got.InputTokens+deref(got.CacheReadTokens) != tc.prompt || got.OutputTokens != tc.completion || *got.ReportedTotalTokens != tc.total ||
			deref(got.CacheReadTokens) != deref(tc.cached) || got.ReasoningTokens != tc.reasoning {
			t.Fatalf("%s: read %+v", tc.raw, got)
		}
	}
}
