//go:build unix

package sockpeek

import (
	"io"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// pair is both ends of a loopback TCP connection.
func pair(t *testing.T) (here, there net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	here, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	there = <-accepted
	t.Cleanup(func() { _ = here.Close(); _ = there.Close() })
	return here, there
}

// A peek tells quiet, data and closed apart and leaves the data to read.
func TestPeekLeavesTheByte(t *testing.T) {
	g := NewWithT(t)
	here, there := pair(t)
	g.Expect(Now(here)).To(Equal(Quiet))

	time.AfterFunc(20*time.Millisecond, func() { _, _ = there.Write([]byte("GET")) })
	g.Expect(Wait(here)).To(Equal(Data))
	g.Expect(Now(here)).To(Equal(Data))
	b := make([]byte, 3)
	_, err := io.ReadFull(here, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("GET"), "the peeked byte is still there")

	g.Expect(there.Close()).To(Succeed())
	g.Eventually(func() State { return Now(here) }).Should(Equal(Closed))
}

// A wait ends at the read deadline.
func TestWaitEndsAtDeadline(t *testing.T) {
	g := NewWithT(t)
	here, _ := pair(t)
	g.Expect(here.SetReadDeadline(time.Now().Add(30 * time.Millisecond))).To(Succeed())
	g.Expect(Wait(here)).To(Equal(Closed))
}

func TestNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	NewWithT(t).Expect(Now(a)).To(Equal(Unsupported))
}
