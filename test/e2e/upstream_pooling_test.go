package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/framework"
)

var _ = Describe("A pooled upstream connection", func() {
	// An upstream on plain HTTP (a model server inside the cluster) that,
	// after each answer, writes a second answer nobody asked for: the
	// gateway's next request on that connection, another tenant's, must get
	// its own answer, never those bytes. Two tenants alternate, streamed and
	// not, 100 ms apart; each answer names the prompt it was written for.
	It("never gives one tenant's answer to the next request", func() {
		t := GinkgoTB()
		g := NewWithT(t)
		up := startLeakyAnthropic(t)
		model := uniqueModel("leaky-pool")
		textModel(t, framework.SystemNamespace, model, fakeBackend(t, "leaky", "anthropic", up.url, "up-key", "up-model"))
		a := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		b := newAccount(t, v1.TenantSpec{}, v1.ApiTokenSpec{})
		const rounds = 5
		for i := range rounds {
			for _, acct := range []struct {
				name, key string
			}{{"A", a.Key}, {"B", b.Key}} {
				stream := i%2 == 1
				prompt := fmt.Sprintf("tenant-%s-round-%d", acct.name, i)
				v := ask(t, "messages", stream, acct.key, model, prompt)
				g.Expect(v.Text).To(Equal("answer for "+prompt), "stream=%v", stream)
				time.Sleep(100 * time.Millisecond)
			}
		}
		g.Expect(up.requests.Load()).To(BeEquivalentTo(2 * rounds))
		g.Expect(up.leaked.Load()).To(BeEquivalentTo(2*rounds), "the upstream wrote its extra answers")
		for _, account := range []*framework.Account{a, b} {
			rows := usageRows(t, account, rounds)
			ledgerUsed(t, account, int64(rounds)*textQuota(leakyInput, leakyOutput))
			for _, r := range rows {
				g.Expect(r.PromptTokens).To(BeEquivalentTo(leakyInput))
				g.Expect(r.CompletionTokens).To(BeEquivalentTo(leakyOutput))
			}
		}
	})
})

// The leaky upstream's usage report of every answer.
const leakyInput, leakyOutput = 12, 3

// leakyAnthropic is an Anthropic Messages upstream written at the TCP
// level: each answer is followed, in a write of its own 2 ms later, by a
// complete second answer with another text.
type leakyAnthropic struct {
	url      string
	requests atomic.Int32
	leaked   atomic.Int32
}

func startLeakyAnthropic(t testing.TB) *leakyAnthropic {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	u := &leakyAnthropic{url: "http://" + ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *leakyAnthropic) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		u.requests.Add(1)
		var in struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &in)
		prompt := ""
		if len(in.Messages) > 0 && len(in.Messages[0].Content) > 0 {
			prompt = in.Messages[0].Content[0].Text
		}
		if _, err := io.WriteString(c, leakyAnswer("answer for "+prompt, in.Stream)); err != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
		if _, err := io.WriteString(c, leakyAnswer("leaked from "+prompt, in.Stream)); err != nil {
			return
		}
		u.leaked.Add(1)
	}
}

// leakyAnswer is a whole HTTP/1.1 answer of the Messages API with text,
// as JSON or as an event stream, with a Content-Length.
func leakyAnswer(text string, stream bool) string {
	q, _ := json.Marshal(text)
	usage := fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d}`, leakyInput, leakyOutput)
	var body, typ string
	if stream {
		typ = "text/event-stream"
		var b strings.Builder
		for _, ev := range []struct{ name, data string }{
			{"message_start", `{"type":"message_start","message":{"id":"msg_leaky","type":"message","role":"assistant","model":"up-model","content":[],"stop_reason":null,"usage":{"input_tokens":` + fmt.Sprint(leakyInput) + `,"output_tokens":0}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + string(q) + `}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":` + fmt.Sprint(leakyOutput) + `}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		}
		body = b.String()
	} else {
		typ = "application/json"
		body = `{"id":"msg_leaky","type":"message","role":"assistant","model":"up-model","content":[{"type":"text","text":` +
			string(q) + `}],"stop_reason":"end_turn","usage":` + usage + `}`
	}
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", typ, len(body), body)
}
