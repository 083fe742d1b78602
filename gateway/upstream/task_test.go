package upstream_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/modelgate/modelgate/gateway/upstream"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 2 ", 2 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"86400", upstream.MaxRetryAfter},
	} {
		if got := upstream.ParseRetryAfter(c.in, now); got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestStatusErrorClasses(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		status int
		submit bool
		want   upstream.Class
		retry  bool
	}{
		{500, true, upstream.Failover, true},
		{503, true, upstream.Failover, true},
		{429, true, upstream.Failover, true},
		{408, true, upstream.Failover, true},
		{401, true, upstream.Failover, false},
		{403, true, upstream.Failover, false},
		{400, true, upstream.Permanent, false},
		{422, true, upstream.Permanent, false},
		{500, false, upstream.Transient, true},
		{429, false, upstream.Transient, true},
		{404, false, upstream.Permanent, false},
		{400, false, upstream.Permanent, false},
	} {
		x := &upstream.Exchange{Status: c.status, Header: http.Header{"Retry-After": {"3"}},
			Body: []byte(`{"error":{"code":1,"message":"upstream says no","type":"x"}}`)}
		e := upstream.StatusError(x, c.submit, now)
		if e.Class != c.want || e.Retryable != c.retry {
			t.Errorf("status %d submit=%v: class %s retry %v, want %s %v", c.status, c.submit, e.Class, e.Retryable, c.want, c.retry)
		}
		if e.RetryAfter != 3*time.Second {
			t.Errorf("status %d: RetryAfter %s", c.status, e.RetryAfter)
		}
		if c.status == 400 && e.Message != "upstream says no" {
			t.Errorf("message %q", e.Message)
		}
	}
}

func TestErrorMessageShapes(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"a","type":"invalid_request_error","param":null,"code":null}}`: "a",
		`{"error":{"code":400,"message":"b","type":"invalid_request"}}`:                     "b",
		`{"error":"c"}`:                       "c",
		`{"success":false,"message":"d"}`:     "d",
		`not json`:                            "",
		`{"error":{"code":"x"},"message":""}`: "",
	} {
		if got := upstream.ErrorMessage([]byte(body)); got != want {
			t.Errorf("ErrorMessage(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestClassifyKeepsClassAndClassifiesOthers(t *testing.T) {
	e := &upstream.Error{Class: upstream.Failover, Message: "m"}
	if got := upstream.Classify(errors.Join(errors.New("wrapped"), e)); got != e {
		t.Fatalf("Classify lost the *Error: %v", got)
	}
	if got := upstream.Classify(errors.New("odd")); got.Class != upstream.Permanent {
		t.Fatalf("an unknown error is %s", got.Class)
	}
}

func TestUsageValid(t *testing.T) {
	parse := func(s string) *upstream.ImageUsage {
		var u upstream.ImageUsage
		if err := json.Unmarshal([]byte(s), &u); err != nil {
			t.Fatal(err)
		}
		return &u
	}
	for _, tc := range []struct {
		json string
		ok   bool
	}{
		{`{"input_tokens":10,"output_tokens":1056,"total_tokens":1066}`, true},
		{`{"input_tokens":10,"output_tokens":1056,"input_tokens_details":{"text_tokens":4,"image_tokens":6}}`, true},
		{`{"input_tokens":10,"output_tokens":1056,"input_tokens_details":{"text_tokens":4,"image_tokens":5}}`, false},
		{`{"input_tokens":10,"output_tokens":1056,"output_tokens_details":{"text_tokens":6,"image_tokens":1000}}`, false},
		{`{"input_tokens":-1,"output_tokens":1056}`, false},
		{`{"input_tokens":10,"output_tokens":1,"input_tokens_details":{"text_tokens":10,"cached_tokens":11}}`, false},
		{`{"input_tokens":120,"output_tokens":1,"input_tokens_details":{"text_tokens":40,"image_tokens":80,"cached_tokens":30,"cached_tokens_details":{"text_tokens":10,"image_tokens":20}}}`, true},
		{`{"input_tokens":120,"output_tokens":1,"input_tokens_details":{"text_tokens":40,"image_tokens":80,"cached_tokens":30,"cached_tokens_details":{"text_tokens":10,"image_tokens":10}}}`, false},
		{`{"input_tokens":120,"output_tokens":1,"input_tokens_details":{"text_tokens":5,"image_tokens":115,"cached_tokens":30,"cached_tokens_details":{"text_tokens":10,"image_tokens":20}}}`, false},
		{`{}`, false},
	} {
		if got := parse(tc.json).Valid(); got != tc.ok {
			t.Errorf("%s: valid %v, want %v", tc.json, got, tc.ok)
		}
	}
	if (*upstream.ImageUsage)(nil).Valid() {
		t.Error("no usage is not valid usage")
	}
}
