package usagelog

import (
	"encoding/json"
	"strconv"

	"github.com/modelgate/modelgate/gateway/store"
)

// appendRow appends the JSON of r, as encoding/json writes it from
// UsageRow's tags (the journal's record format): the same members in the
// same order, each omitempty member left out when empty. Every request's
// row passes here, and encoding/json's reflection costs several times
// what this does (BenchmarkAppendRow). The replay reads the
// records with encoding/json; TestAppendRowMatchesEncodingJSON holds the two
// to the same bytes.
func appendRow(b []byte, r *store.UsageRow) []byte {
	b = append(b, `{"request_id":`...)
	b = appendString(b, r.RequestID)
	b = appendInt(b, `,"created_at":`, r.CreatedAt)
	b = appendInt(b, `,"user_id":`, r.UserID)
	b = appendInt(b, `,"token_id":`, r.TokenID)
	b = append(b, `,"token_name":`...)
	b = appendString(b, r.TokenName)
	b = append(b, `,"model_name":`...)
	b = appendString(b, r.ModelName)
	if r.TaskID != "" {
		b = append(b, `,"task_id":`...)
		b = appendString(b, r.TaskID)
	}
	b = appendInt(b, `,"prompt_tokens":`, r.PromptTokens)
	b = appendInt(b, `,"completion_tokens":`, r.CompletionTokens)
	b = appendOptional(b, `,"cache_tokens":`, r.CacheTokens)
	b = appendOptional(b, `,"cache_creation_tokens":`, r.CacheCreationTokens)
	b = appendOptional(b, `,"reported_total_tokens":`, r.ReportedTotalTokens)
	b = append(b, `,"billing_phase":`...)
	b = appendString(b, r.BillingPhase)
	b = appendInt(b, `,"quota":`, int64(r.Quota))
	if r.Backend != "" {
		b = append(b, `,"backend":`...)
		b = appendString(b, r.Backend)
	}
	b = append(b, `,"charge":{`...)
	if r.Charge.Apply {
		b = append(b, `"apply":true`...)
	}
	if r.Charge.LeaseID != 0 {
		if r.Charge.Apply {
			b = append(b, ',')
		}
		b = appendInt(b, `"lease_id":`, r.Charge.LeaseID)
	}
	return append(b, "}}"...)
}

func appendInt(b []byte, member string, v int64) []byte {
	return strconv.AppendInt(append(b, member...), v, 10)
}

func appendOptional(b []byte, member string, v *int64) []byte {
	if v == nil {
		return b
	}
	return appendInt(b, member, *v)
}

// appendString appends s as a JSON string. Printable ASCII other than the
// characters encoding/json escapes (quote, backslash, and <, >, & for HTML)
// is copied; any other string is left to encoding/json, which escapes it
// and replaces invalid UTF-8 as the replay's decoder expects.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
