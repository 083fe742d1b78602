package store

import (
	"encoding/base64"
	"encoding/binary"
	"net/url"
	"strconv"
	"time"
)

// usageParams are the only query parameters the usage endpoints accept.
var usageParams = map[string]bool{
	"start_timestamp": true, "end_timestamp": true, "token_id": true, "page_size": true, "cursor": true,
}

// ParseUsageQuery applies the contract's rules to the query parameters of
// the usage endpoints (and of the console's usage page, which takes the
// same); a non-empty string is the 422 message. UserID is left to the caller.
//
// A window given only start_timestamp ends now (the second after now, the
// end being exclusive); its pages keep that end, which each cursor carries,
// so paging a growing window neither skips nor repeats a row.
func ParseUsageQuery(q url.Values, now time.Time) (UsageQuery, string) {
	var uq UsageQuery
	for name, vals := range q {
		if !usageParams[name] {
			return uq, "unknown query parameter: " + name
		}
		if len(vals) > 1 {
			return uq, "repeated query parameter: " + name
		}
	}
	var msg string
	intParam := func(name string, required bool) int64 {
		s, present := q[name]
		if !present {
			if required && msg == "" {
				msg = name + " is required"
			}
			return 0
		}
		v, err := strconv.ParseInt(s[0], 10, 64)
		if err != nil && msg == "" {
			msg = name + " must be an integer"
		}
		return v
	}
	uq.Start = intParam("start_timestamp", true)
	uq.End = intParam("end_timestamp", false)
	if _, present := q["end_timestamp"]; !present {
		uq.End = now.Unix() + 1
		if end, ok := cursorEnd(q.Get("cursor")); ok {
			uq.End = end
		}
	}
	uq.TokenID = intParam("token_id", false)
	uq.PageSize = int(intParam("page_size", false))
	if msg != "" {
		return uq, msg
	}
	if _, present := q["page_size"]; present && (uq.PageSize < 1 || uq.PageSize > MaxPageSize) {
		return uq, "page_size must be between 1 and 100"
	}
	if _, present := q["token_id"]; present && uq.TokenID <= 0 {
		return uq, "token_id must be a positive integer"
	}
	uq.Cursor = q.Get("cursor")
	return uq, ""
}

// cursorEnd reads the window end a cursor was issued for; its MAC, checked
// when the page is read (openCursor), covers that end.
func cursorEnd(cursor string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != cursorBody+cursorMAC {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[17:])), true
}
