package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzChunkedMatchesNetHTTP holds the chunked decoding to net/http's: any
// body net/http reads whole reads whole and the same here, whatever pieces
// it arrives in, and a body refused here is one net/http refuses.
func FuzzChunkedMatchesNetHTTP(f *testing.F) {
	for _, seed := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
		"A \r\n0123456789\r\n0\r\n\r\n",
		"5\nhello\r\n0\r\n\r\n",
		"5\r\nhello\n0\r\n\r\n",
		"+5\r\nhello\r\n0\r\n\r\n",
		"ffffffffffffffff\r\nx\r\n",
		"0\r\n\r\n",
		"3\r\nab",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		want, wantErr := readNetHTTP(head + string(data))
		got, gotErr := readPieces(t, head+string(data), int(step%16)+1)
		if wantErr == nil && (gotErr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("net/http read %q; here %q, %v", want, got, gotErr)
		}
		// Refusals of net/http's not made here: its limit on the overhead
		// of tiny chunks, and those about the trailer, whose fields are
		// skipped here (no caller reads them) and parsed there as a header.
		if gotErr == nil && wantErr != nil && !strings.Contains(wantErr.Error(), "too much non-data") &&
			!strings.Contains(wantErr.Error(), "trailer") && !strings.Contains(wantErr.Error(), "MIME header") {
			t.Fatalf("net/http refused it (%v); here %q", wantErr, got)
		}
	})
}

func readNetHTTP(answer string) ([]byte, error) {
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), nil)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(resp.Body)
}

// readPieces reads the answer through a connection that delivers it step
// bytes at a time.
func readPieces(t *testing.T, answer string, step int) ([]byte, error) {
	tr := newTransport()
	c := newConn(tr, "fuzz:80", &piecesConn{data: []byte(answer), step: step})
	req, _ := http.NewRequest(http.MethodGet, "http://fuzz/", nil)
	head, err := writeHead(req)
	if err != nil {
		t.Fatal(err)
	}
	defer putWriteBuf(head)
	resp, err := c.roundTrip(req, *head)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// piecesConn is a connection that reads its data step bytes at a time and
// discards what is written.
type piecesConn struct {
	data []byte
	step int
}

func (c *piecesConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *piecesConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *piecesConn) Close() error                     { return nil }
func (c *piecesConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *piecesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *piecesConn) SetDeadline(time.Time) error      { return nil }
func (c *piecesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *piecesConn) SetWriteDeadline(time.Time) error { return nil }
