package batches

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits of an input file, as the public batch APIs set them.
const (
	// MaxLines is the most requests one OpenAI batch holds.
	MaxLines = 50000
	// MaxMessageBatchLines is the most requests one Anthropic message
	// batch holds.
	MaxMessageBatchLines = 100000
	// MaxLineBytes bounds one line; OpenAI bounds the file (200 MB), this
	// bounds the memory one line takes while it is read.
	MaxLineBytes = 8 << 20
	// MaxCustomIDLen bounds custom_id.
	MaxCustomIDLen = 512
)

// Line is one request of an input file.
type Line struct {
	// Number is the 1-based line number in the file.
	Number int64
	// CustomID is the caller's ID of the request, unique in the file.
	CustomID string
	// Body is the request body, a JSON object, sent as it is.
	Body json.RawMessage
}

// InputError is why an input file is refused, naming its line (0: the file
// as a whole). Its Code is the one OpenAI reports in a batch's errors.
type InputError struct {
	Code    string
	Line    int64
	Message string
}

func (e *InputError) Error() string {
	if e.Line == 0 {
		return e.Message
	}
	return "line " + strconv.FormatInt(e.Line, 10) + ": " + e.Message
}

type inputLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// ParseInput reads a JSONL input file of at most maxLines requests whose
// every line must be a POST to endpoint and calls each with the line in
// order. The first invalid line stops the read with an *InputError: OpenAI
// fails the whole batch in validation, before any line runs, so nothing is
// billed for a bad file.
// Blank lines are skipped. A read error of r is returned as it is.
func ParseInput(r io.Reader, endpoint string, maxLines int64, each func(Line) error) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	seen := make(map[string]struct{})
	var n, count int64
	for {
		raw, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return count, &InputError{Code: "invalid_request", Line: n + 1, Message: fmt.Sprintf("a line is longer than %d bytes", MaxLineBytes)}
			}
			return count, err
		}
		eof := errors.Is(err, io.EOF)
		if len(raw) > 0 || !eof {
			n++
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 {
			l, perr := parseLine(t, n, endpoint, seen)
			if perr != nil {
				return count, perr
			}
			count++
			if count > maxLines {
				return count, &InputError{Code: "too_many_requests", Line: n, Message: fmt.Sprintf("a batch holds at most %d requests", maxLines)}
			}
			if err := each(l); err != nil {
				return count, err
			}
		}
		if eof {
			break
		}
	}
	if count == 0 {
		return 0, &InputError{Code: "empty_file", Message: "the input file holds no request"}
	}
	return count, nil
}

// MaxLinesOf is the most requests a batch submitted on api holds
// (v1.BatchSpec.API: "anthropic" or "openai").
func MaxLinesOf(api string) int64 {
	if api == "anthropic" {
		return MaxMessageBatchLines
	}
	return MaxLines
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line without its newline, refusing lines longer than
// MaxLineBytes before they are held in memory whole.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes+1 {
			return nil, errLineTooLong
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		}
		return buf, err
	}
}

func parseLine(t []byte, n int64, endpoint string, seen map[string]struct{}) (Line, error) {
	bad := func(code, format string, a ...any) (Line, error) {
		return Line{}, &InputError{Code: code, Line: n, Message: fmt.Sprintf(format, a...)}
	}
	var in inputLine
	if err := json.Unmarshal(t, &in); err != nil {
		return bad("invalid_json_line", "the line is not a JSON object")
	}
	switch {
	case in.CustomID == nil || *in.CustomID == "":
		return bad("missing_required_parameter", "custom_id is required")
	case len(*in.CustomID) > MaxCustomIDLen:
		return bad("invalid_request", "custom_id is longer than %d characters", MaxCustomIDLen)
	case in.Method != "POST":
		return bad("invalid_request", "method must be POST")
	case in.URL != endpoint:
		return bad("mismatched_endpoint", "url %q is not the batch's endpoint %q", in.URL, endpoint)
	}
	body := bytes.TrimSpace(in.Body)
	if len(body) == 0 || body[0] != '{' {
		return bad("invalid_request", "body must be a JSON object")
	}
	if _, dup := seen[*in.CustomID]; dup {
		return bad("duplicate_custom_id", "custom_id %q is used by an earlier line", *in.CustomID)
	}
	seen[*in.CustomID] = struct{}{}
	return Line{Number: n, CustomID: *in.CustomID, Body: body}, nil
}

// RequestID is the request ID of line number of a batch: the same on every
// run, so a line's reservation and usage row (keyed by it) are made once
// however often a restarted controller reaches the line.
func RequestID(batchID string, number int64) string {
	sum := sha256.Sum256([]byte(batchID + "\x00" + strconv.FormatInt(number, 10)))
	return "batch_req_" + hex.EncodeToString(sum[:12])
}
