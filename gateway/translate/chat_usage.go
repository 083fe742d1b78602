package translate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// decodeChatUsage decodes a chat completions usage object into u as
// json.Unmarshal does, and reports whether it decoded. Every billed chat
// answer passes here, and the decoder's reflection cost 1.5 µs of the
// gateway's CPU per request (docs/performance.md, "Stop 28"), so the usual
// shape (members once each, lower case, integer or null values, the two
// details objects) is read by walking the bytes, and anything else is left
// to json.Unmarshal: the two cannot disagree (FuzzChatUsageMatchesDecoder).
func decodeChatUsage(raw []byte, u *cUsage) bool {
	if walkChatUsage(raw, u) {
		return true
	}
	*u = cUsage{}
	return json.Unmarshal(raw, u) == nil
}

// chatUsageMembers are cUsage's members and its details objects'.
var chatUsageMembers = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
	"completion_tokens_details", "cached_tokens", "reasoning_tokens"}

// walkChatUsage reads the usual shape; false means "ask the decoder" (u is
// then partly written).
func walkChatUsage(raw []byte, u *cUsage) bool {
	if !json.Valid(raw) {
		return false
	}
	return eachMemberOnce(raw, func(name string, v []byte) bool {
		switch name {
		case "prompt_tokens":
			return readInt(v, &u.PromptTokens)
		case "completion_tokens":
			return readInt(v, &u.CompletionTokens)
		case "total_tokens":
			return readInt(v, &u.TotalTokens)
		case "prompt_tokens_details":
			if isNull(v) {
				u.PromptTokensDetails = nil
				return true
			}
			d := &struct {
				CachedTokens *int64 `json:"cached_tokens,omitempty"`
			}{}
			u.PromptTokensDetails = d
			return eachMemberOnce(v, func(name string, v []byte) bool {
				if name != "cached_tokens" {
					return true
				}
				if isNull(v) {
					d.CachedTokens = nil
					return true
				}
				d.CachedTokens = new(int64)
				return readInt(v, d.CachedTokens)
			})
		case "completion_tokens_details":
			if isNull(v) {
				u.CompletionTokensDetails = nil
				return true
			}
			d := &struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			}{}
			u.CompletionTokensDetails = d
			return eachMemberOnce(v, func(name string, v []byte) bool {
				return name != "reasoning_tokens" || readInt(v, &d.ReasoningTokens)
			})
		}
		return true
	})
}

// eachMemberOnce calls fn with the name and value of each member of the
// object obj (valid JSON) and reports whether obj is an object whose every
// fn returned true. A member name that is not plain ASCII, that repeats, or
// that matches one of chatUsageMembers only when case is ignored (the
// decoder would take it) reports false instead.
func eachMemberOnce(obj []byte, fn func(name string, v []byte) bool) bool {
	var seen []string
	ok := true
	isObject := Members(obj, func(k, v []byte) bool {
		name, plain := plainKey(k)
		switch {
		case !plain, slices.Contains(seen, name), foldsToMember(name):
			ok = false
		default:
			seen = append(seen, name)
			ok = fn(name, v)
		}
		return ok
	})
	return isObject && ok
}

// plainKey is a quoted member key's text when it is printable ASCII
// without escapes.
func plainKey(quoted []byte) (string, bool) {
	inner := quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c == '\\' || c < 0x20 || c >= 0x7f {
			return "", false
		}
	}
	return string(inner), true
}

// foldsToMember reports whether name is not one of chatUsageMembers but
// equals one when case is ignored.
func foldsToMember(name string) bool {
	for _, m := range chatUsageMembers {
		if name != m && strings.EqualFold(name, m) {
			return true
		}
	}
	return false
}

func isNull(v []byte) bool { return string(v) == "null" }

// readInt reads an integer literal into dst; null leaves dst as it is (as
// the decoder does). A fraction, an exponent or an overflow reports false.
func readInt(v []byte, dst *int64) bool {
	if isNull(v) {
		return true
	}
	if len(v) == 0 || bytes.ContainsAny(v, ".eE\"tfn[{") {
		return false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}
