package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// decodeChatUsage decodes a chat completions usage object into u as
// json.Unmarshal does, and reports whether it decoded. Every billed chat
// answer passes here, and the decoder's reflection is a visible share of
// the gateway's CPU per request, so the usual
// shape (members once each, lower case, integer or null values, the two
// details objects) is read by walking the bytes, and anything else is left
// to json.Unmarshal: the two cannot disagree (FuzzChatUsageMatchesDecoder).
func decodeChatUsage(raw []byte, u *chatUsage) bool {
	if walkChatUsage(raw, u) {
		return true
	}
	*u = chatUsage{}
	return json.Unmarshal(raw, u) == nil
}

// chatUsageMembers are chatUsage's members and its details objects'; a
// member's index is its bit in eachMemberOnce's record of what it saw.
var chatUsageMembers = [...]string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
	"completion_tokens_details", "cached_tokens", "reasoning_tokens"}

// walkChatUsage reads the usual shape; false means "ask the decoder" (u is
// then partly written).
func walkChatUsage(raw []byte, u *chatUsage) bool {
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
			if u.PromptTokensDetails = nil; isNull(v) {
				return true
			}
			d := &chatPromptTokensDetails{}
			u.PromptTokensDetails = d
			return eachMemberOnce(v, func(name string, v []byte) bool {
				if name != "cached_tokens" || isNull(v) {
					return true
				}
				d.CachedTokens = new(int64)
				return readInt(v, d.CachedTokens)
			})
		case "completion_tokens_details":
			if u.CompletionTokensDetails = nil; isNull(v) {
				return true
			}
			d := &chatCompletionTokensDetails{}
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
// fn returned true. fn sees one of chatUsageMembers, or a name the decoder
// would ignore too; a member the decoder could read otherwise (a name with
// escapes or beyond printable ASCII, one of chatUsageMembers repeated, or
// one that matches only when case is ignored) reports false instead.
func eachMemberOnce(obj []byte, fn func(name string, v []byte) bool) bool {
	var seen uint
	ok := true
	isObject := Members(obj, func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		bit, known := memberBit(name)
		switch {
		case !printable(name), known && seen&bit != 0, !known && foldsToMember(name):
			ok = false
		default:
			seen |= bit
			ok = fn(string(name), v) // the switch in fn does not keep the string
		}
		return ok
	})
	return isObject && ok
}

// memberBit is name's bit when it is one of chatUsageMembers.
func memberBit(name []byte) (uint, bool) {
	for i, m := range chatUsageMembers {
		if string(name) == m {
			return 1 << i, true
		}
	}
	return 0, false
}

// printable reports whether a key's text is printable ASCII without
// escapes.
func printable(name []byte) bool {
	for _, c := range name {
		if c == '\\' || c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// foldsToMember reports whether name equals one of chatUsageMembers when
// case is ignored.
func foldsToMember(name []byte) bool {
	for _, m := range chatUsageMembers {
		if strings.EqualFold(string(name), m) {
			return true
		}
	}
	return false
}

func isNull(v []byte) bool { return string(v) == "null" }

// readInt reads an integer literal into dst; null leaves dst as it is (as
// the decoder does). Anything else, a fraction, an exponent or an overflow
// included, is refused by ParseInt and reports false.
func readInt(v []byte, dst *int64) bool {
	if isNull(v) {
		return true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}
