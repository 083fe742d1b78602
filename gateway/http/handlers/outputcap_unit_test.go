package handlers

import (
	"testing"

	"github.com/modelgate/modelgate/gateway/upstream"
)

// TestSetOutputCap: the lowered cap goes in the protocol's field, every
// other byte kept.
func TestSetOutputCap(t *testing.T) {
	for _, c := range []struct {
		proto      upstream.Protocol
		body, want string
	}{
		{upstream.Messages, `{"model":"m","max_tokens":32000,"messages":[]}`, `{"model":"m","max_tokens":123,"messages":[]}`},
		{upstream.Messages, `{"model":"m","max_tokens":0}`, `{"model":"m","max_tokens":0}`},
		{upstream.Responses, `{"model":"m","input":"hi"}`, `{"max_output_tokens":123,"model":"m","input":"hi"}`},
		{upstream.Responses, `{"model":"m", "max_output_tokens": 9000}`, `{"model":"m", "max_output_tokens": 123}`},
		{upstream.ChatCompletions, `{"model":"m","max_tokens":500}`, `{"model":"m","max_tokens":123}`},
		{upstream.ChatCompletions, `{"model":"m","max_completion_tokens":500}`, `{"model":"m","max_completion_tokens":123}`},
		{upstream.ChatCompletions, `{"max_tokens":7,"max_completion_tokens":500}`, `{"max_tokens":123,"max_completion_tokens":123}`},
		{upstream.ChatCompletions, `{"model":"m"}`, `{"max_completion_tokens":123,"model":"m"}`},
	} {
		got, err := setOutputCap(c.proto, []byte(c.body), 123)
		if err != nil || string(got) != c.want {
			t.Errorf("%s %s: got %s, %v; want %s", c.proto, c.body, got, err, c.want)
		}
	}
}
