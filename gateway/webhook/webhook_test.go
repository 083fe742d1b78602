package webhook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/webhook"
)

// The published Standard Webhooks test vector: any conforming receiver
// library accepts what Sign produces.
func TestSignMatchesStandardWebhooksVector(t *testing.T) {
	key, err := webhook.Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got, err := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		secret string
		ok     bool
		n      int
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true, 24},
		{"a-plain-secret-of-32-bytes-long!", true, 32},
		{"short", false, 0},
		{"whsec_not*base64", false, 0},
		{"whsec_c2hvcnQ=", false, 0}, // decodes to 5 bytes
	} {
		key, err := webhook.Key(tc.secret)
		if (err == nil) != tc.ok || len(key) != tc.n {
			t.Errorf("Key(%q) = %d bytes, %v; want ok=%v with %d bytes", tc.secret, len(key), err, tc.ok, tc.n)
		}
		if err != nil && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("error %q repeats the secret", err)
		}
	}
}

func TestSendVerifies(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"type":"task.completed"}`)
	now := time.Now()
	var verr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			verr = err
		} else {
			verr = wh.Verify(got, r.Header)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	res := loopbackSender().Send(context.Background(), srv.URL, key, "evt_1", body, now)
	if res.Err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("send: %+v", res)
	}
	if verr != nil {
		t.Fatalf("receiver could not verify: %v", verr)
	}
}

// A receiver using the reference library refuses what was tampered with.
func TestReferenceLibraryRejectsTampering(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"a":1}`)
	now := time.Now()
	sig, err := webhook.Sign(key, "evt_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(webhook.HeaderID, "evt_1")
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(webhook.HeaderSignature, sig)
	wh, _ := standardwebhooks.NewWebhookRaw(key)
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	if err := wh.Verify([]byte(`{"a":2}`), h); err == nil {
		t.Error("a changed body verified")
	}
	other := h.Clone()
	other.Set(webhook.HeaderID, "evt_2")
	if err := wh.Verify(body, other); err == nil {
		t.Error("another event ID verified")
	}
	stale := h.Clone()
	stale.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Add(-time.Hour).Unix(), 10))
	if err := wh.Verify(body, stale); err == nil {
		t.Error("an hour-old timestamp verified")
	}
	wrongKey, _ := standardwebhooks.NewWebhookRaw([]byte("another-key-of-sixteen"))
	if err := wrongKey.Verify(body, h); err == nil {
		t.Error("another key verified")
	}
}

func TestSendFailures(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	s := loopbackSender()
	if res := s.Send(context.Background(), srv.URL, key, "evt", nil, time.Now()); res.StatusCode != http.StatusFound || res.Err == nil {
		t.Errorf("a redirect is not an acknowledgement: %+v", res)
	}
	if res := s.Send(context.Background(), srv.URL, key, "evt", nil, time.Now()); res.StatusCode != 500 || res.Err == nil {
		t.Errorf("500: %+v", res)
	}
	// A closed port: the reason names no address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	res := s.Send(context.Background(), "http://"+addr+"/hook", key, "evt", nil, time.Now())
	if res.Err == nil || strings.Contains(res.Err.Error(), "127.0.0.1") {
		t.Errorf("unreachable receiver: %+v", res)
	}
}

func TestRetryAfterBacksOffWithJitter(t *testing.T) {
	steps := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	for i, step := range steps {
		for range 20 {
			d := webhook.RetryAfter(int32(i + 1))
			if d < step*8/10 || d > step*12/10 {
				t.Fatalf("wait after attempt %d is %v, want %v ± 20%%", i+1, d, step)
			}
		}
	}
}

// loopbackSender sends to the receivers of these tests, which listen on
// loopback: only an allow-list admits it (as --allow-private-networks does
// for local setups).
func loopbackSender() *webhook.Sender {
	g := &netguard.Guard{}
	g.AllowLoopback()
	s := webhook.NewSender(g, "")
	return &s
}

// A receiver on an internal address gets nothing, whatever the URL's form,
// and the error names no address.
func TestSendRefusesInternalAddresses(t *testing.T) {
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://10.0.0.1/hook",
		"http://[::ffff:192.168.1.1]/hook", "http://user:pw@example.com/hook", "ftp://example.com/hook"} {
		res := (&webhook.Sender{}).Send(context.Background(), u, []byte("0123456789abcdef"), "evt_1", []byte("{}"), time.Now())
		if !res.Forbidden || res.Err == nil || res.StatusCode != 0 {
			t.Errorf("%s: %+v, want a refusal", u, res)
		}
		if strings.Contains(res.Err.Error(), "169.254") || strings.Contains(res.Err.Error(), "10.0.0.1") {
			t.Errorf("%s: the error names the address: %v", u, res.Err)
		}
	}
}
