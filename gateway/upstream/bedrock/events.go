package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/modelgate/modelgate/gateway/translate"
)

// eventBody reads ConverseStream's AWS event stream and yields it as
// server-sent events, one per frame, as the gateway's stream reader
// expects: "event: <:event-type>" with the frame's JSON payload, and for an
// exception frame "event: error" with
// {"error":{"type":<the gateway's error type>,"message":"<exception>: <message>"}}.
// Frames are decoded one at a time as the reader asks, so a slow stream
// still reaches the client event by event.
type eventBody struct {
	src     io.ReadCloser
	dec     *eventstream.Decoder
	payload []byte
	out     bytes.Buffer
	err     error
}

func newEventBody(src io.ReadCloser) *eventBody {
	return &eventBody{src: src, dec: eventstream.NewDecoder()}
}

func (e *eventBody) Read(p []byte) (int, error) {
	for e.out.Len() == 0 {
		if e.err != nil {
			return 0, e.err
		}
		msg, err := e.dec.Decode(e.src, e.payload[:0])
		if err != nil {
			if errors.Is(err, io.EOF) {
				e.err = io.EOF
			} else {
				e.err = fmt.Errorf("bedrock event stream: %w", err)
			}
			continue
		}
		e.payload = msg.Payload
		e.frame(msg)
	}
	return e.out.Read(p)
}

func (e *eventBody) Close() error { return e.src.Close() }

// frame renders one decoded frame.
func (e *eventBody) frame(msg eventstream.Message) {
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	switch header(":message-type") {
	case "event":
		ev := translate.Event{Name: header(":event-type"), Data: msg.Payload}
		e.out.Write(ev.AppendSSE(nil))
	case "exception":
		exc := header(":exception-type")
		var m struct {
			Message  string `json:"message"`
			MessageU string `json:"Message"`
		}
		_ = json.Unmarshal(msg.Payload, &m)
		e.writeError(exc, m.Message+m.MessageU)
	default: // "error": an unmodelled failure, named in headers
		e.writeError(header(":error-code"), header(":error-message"))
	}
}

func (e *eventBody) writeError(name, message string) {
	if name != "" {
		message = name + ": " + message
	}
	data, _ := json.Marshal(map[string]any{"error": map[string]any{"type": translate.BedrockErrorType(name), "message": message}})
	e.out.Write(translate.Event{Name: "error", Data: data}.AppendSSE(nil))
}
