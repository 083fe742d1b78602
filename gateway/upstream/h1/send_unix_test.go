//go:build unix

package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A request the socket's buffers cannot take at once (a small send buffer,
// a server that reads late through a small receive buffer): what the first
// write leaves goes on after it, and the server gets the whole body.
func TestRequestLargerThanSocketBuffersIsSentWhole(t *testing.T) {
	g := NewWithT(t)
	small := func(opt int) func(network, address string, c syscall.RawConn) error {
		return func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) }); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := (&net.ListenConfig{Control: small(syscall.SO_RCVBUF)}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a short body fails, not hangs
		time.Sleep(100 * time.Millisecond)                  // the client's write finds the buffers full
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(req.Body)
		got <- string(b)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}()
	tr := newTransport()
	tr.DialContext = (&net.Dialer{Control: small(syscall.SO_SNDBUF)}).DialContext
	body := strings.Repeat("0123456789abcdef", (inlineBody-1024)/16) // one write with its head
	_, answer, err := post(t, tr, "http://"+ln.Addr().String()+"/v1/chat/completions", body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(answer).To(Equal("ok"))
	g.Expect(<-got).To(Equal(body))
}
