package batches

import (
	"encoding/json"
)

// OutputLine is one line of a batch's output or error file, in OpenAI's
// format: a line answered by the upstream (2xx or not) carries response;
// a line that got no answer (expired, cancelled, refused before sending)
// carries error.
type OutputLine struct {
	ID       string    `json:"id"`
	CustomID string    `json:"custom_id"`
	Response *Response `json:"response"`
	Error    *Error    `json:"error"`
}

// Response is the answer to a line: its status, the request ID the usage
// row is keyed by, and the body as the endpoint returned it.
type Response struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// Error is why a line has no response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Answered is the output line of a line the endpoint answered with status
// and body. Lines with a 2xx status go to the output file, others to the
// error file (Failed).
func Answered(batchID string, l Line, status int, body []byte) OutputLine {
	id := RequestID(batchID, l.Number)
	return OutputLine{ID: id, CustomID: l.CustomID, Response: &Response{StatusCode: status, RequestID: id, Body: body}}
}

// Unanswered is the error-file line of a line that never ran, such as
// code batch_expired or batch_cancelled.
func Unanswered(batchID string, l Line, code, message string) OutputLine {
	return OutputLine{ID: RequestID(batchID, l.Number), CustomID: l.CustomID, Error: &Error{Code: code, Message: message}}
}

// Failed reports whether the line belongs in the error file.
func (o OutputLine) Failed() bool {
	return o.Response == nil || o.Response.StatusCode < 200 || o.Response.StatusCode > 299
}

// AppendJSONL appends o and a newline to dst.
func (o OutputLine) AppendJSONL(dst []byte) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return dst, err
	}
	return append(append(dst, b...), '\n'), nil
}
