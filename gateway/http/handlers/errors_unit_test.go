package handlers

import (
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/translate"
	"github.com/modelgate/modelgate/gateway/upstream"
)

// TestOwnAndRelayedErrorsShareTheTable: for every error status, the
// gateway's own error (a text protocol's fail), an upstream's error relayed
// to the client (UpstreamError.ClientBody) and the error event of a stream
// (usageNotRecorded's translate.ErrorBody) carry the same type.
func TestOwnAndRelayedErrorsShareTheTable(t *testing.T) {
	want := map[upstream.Protocol]map[int]string{
		upstream.Messages:        {503: "api_error", 504: "timeout_error", 529: "overloaded_error", 502: "api_error"},
		upstream.ChatCompletions: {503: "server_error", 504: "server_error", 529: "server_error", 502: "server_error"},
		upstream.Responses:       {503: "server_error", 504: "server_error", 529: "server_error", 502: "server_error"},
	}
	for _, p := range []textProtocol{messagesProtocol(), chatProtocol(), responsesProtocol()} {
		t.Run(string(p.proto), func(t *testing.T) {
			g := NewWithT(t)
			for status := 400; status < 600; status++ {
				ue := &upstream.Error{Status: status, Message: "from the upstream"}
				relayed, _ := translate.FieldString(ue.ClientBody(p.proto), "error", "type")

				rec := httptest.NewRecorder()
				p.fail(rec, ue.ClientStatus(), "", "from the gateway")
				g.Expect(rec.Code).To(Equal(ue.ClientStatus()))
				own, _ := translate.FieldString(rec.Body.Bytes(), "error", "type")
				g.Expect(own).To(Equal(relayed), "status %d", status)

				streamed, _ := translate.FieldString(translate.ErrorBody(p.proto, ue.ClientStatus(), "in a stream"), "error", "type")
				g.Expect(streamed).To(Equal(own), "status %d", status)

				if w, ok := want[p.proto][status]; ok {
					g.Expect(own).To(Equal(w), "status %d", status)
				}
			}
		})
	}
}
