package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// counterFunc counts with a function.
type counterFunc func(ctx context.Context, b Backend, body []byte) (int64, error)

func (f counterFunc) CountTokens(ctx context.Context, b Backend, body []byte, _ http.Header) (int64, error) {
	return f(ctx, b, body)
}

func answer(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestReadCount(t *testing.T) {
	if n, err := ReadCount(answer(200, `{"input_tokens":17}`), Messages, "input_tokens"); n != 17 || err != nil {
		t.Fatalf("ReadCount = %d, %v; want 17", n, err)
	}
	for _, body := range []string{`{}`, `{"input_tokens":"7"}`, `{"input_tokens":-1}`, `not json`} {
		_, err := ReadCount(answer(200, body), Messages, "input_tokens")
		if ue, ok := As(err); !ok || ue.Status != http.StatusBadGateway || !ue.Retryable {
			t.Errorf("ReadCount(%s) = %v; want a retryable 502", body, err)
		}
	}
	resp := answer(429, `{"error":{"message":"slow down"}}`)
	resp.Header.Set("Retry-After", "3")
	_, err := ReadCount(resp, Responses, "input_tokens")
	ue, ok := As(err)
	if !ok || ue.Status != 429 || !ue.Retryable || ue.RetryAfter != 3*time.Second || ue.Protocol != Responses || ue.Message != "slow down" {
		t.Fatalf("ReadCount(429) = %+v; want a retryable 429 with its wait, protocol and message", err)
	}
}

func TestCountTokensSetsTheModelAndClassifies(t *testing.T) {
	ctx := context.Background()
	var got string
	n, err := CountTokens(ctx, counterFunc(func(ctx context.Context, _ Backend, body []byte) (int64, error) {
		got = WithClientQuery(ctx, "http://u/v1/messages/count_tokens") + " " + string(body)
		return 5, nil
	}), Backend{UpstreamModel: "up"}, []byte(`{"model":"client"}`), nil, "beta=true")
	if n != 5 || err != nil || got != `http://u/v1/messages/count_tokens?beta=true {"model":"up"}` {
		t.Fatalf("CountTokens = %d, %v, sent %s", n, err, got)
	}

	_, err = CountTokens(ctx, counterFunc(func(context.Context, Backend, []byte) (int64, error) {
		return 0, errors.New("connection reset")
	}), Backend{}, []byte(`{"model":"m"}`), nil, "")
	if ue, ok := As(err); !ok || ue.Status != http.StatusBadGateway || !ue.Retryable {
		t.Fatalf("transport failure = %v; want a retryable 502", err)
	}

	_, err = CountTokens(ctx, counterFunc(func(ctx context.Context, _ Backend, _ []byte) (int64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}), Backend{Timeout: 20 * time.Millisecond}, []byte(`{"model":"m"}`), nil, "")
	if ue, ok := As(err); !ok || ue.Status != http.StatusGatewayTimeout || !ue.Retryable {
		t.Fatalf("timeout = %v; want a retryable 504", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = CountTokens(cctx, counterFunc(func(ctx context.Context, _ Backend, _ []byte) (int64, error) {
		return 0, ctx.Err()
	}), Backend{}, []byte(`{"model":"m"}`), nil, "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled = %v; want the context's error", err)
	}
}
