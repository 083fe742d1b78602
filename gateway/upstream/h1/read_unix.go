//go:build unix

package h1

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// readInto reads once into p; a closed connection is io.EOF.
func (c *conn) readInto(p []byte) (int, error) {
	if c.raw == nil {
		return c.nc.Read(p)
	}
	var n int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		n, rerr = readFD(fd, p)
		return !errors.Is(rerr, syscall.EAGAIN)
	})
	return c.result(n, err, rerr)
}

// sendAndAwait writes a small request from inside the poller's read
// callback, then waits there until the socket is readable: the answer
// cannot be there when the write returns, so the read that would find
// nothing (EAGAIN) before the wait is not made. The runtime resets the
// socket's readiness before the callback runs (RawRead), and the answer's
// arrival follows the write, so its wake-up is not missed. What the
// socket's buffer has no room for goes on through the connection's
// blocking write, and the answer's first read then waits as usual. A
// failed wait after the write is left to that read to report.
func (c *conn) sendAndAwait(p []byte) error {
	if c.raw == nil {
		return c.send(p)
	}
	var werr error
	sent := false
	err := c.raw.Read(func(fd uintptr) bool {
		if sent {
			return true // readable: the answer (or the connection's end) is there
		}
		if p, werr = writeFD(fd, p); werr != nil || len(p) > 0 {
			return true // failed, or the socket's buffer is full
		}
		sent = true
		return false
	})
	switch {
	case werr != nil:
		return &nothingReadError{errBrokenConn("write", c.opError("write", os.NewSyscallError("write", werr)))}
	case err != nil && !sent:
		return &nothingReadError{errBrokenConn("write", c.opError("write", err))}
	case len(p) > 0:
		return c.send(p)
	}
	return nil
}

// writeFD writes p to fd without waiting and returns what the socket's
// buffer had no room for.
func writeFD(fd uintptr, p []byte) ([]byte, error) {
	for len(p) > 0 {
		n, err := syscall.Write(int(fd), p)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN), err == nil && n == 0:
			return p, nil
		case err != nil:
			return p, err
		}
		p = p[n:]
	}
	return p, nil
}

// readPooled waits until the socket is readable and reads once into a
// buffer from the pool, taken only once there is something to read: a
// stream that waits for its upstream's next event holds no buffer. The
// buffer is nil when nothing was read.
func (c *conn) readPooled() (*[]byte, int, error) {
	if c.raw == nil {
		return readPooledPlain(c)
	}
	var b *[]byte
	var n int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		b = getReadBuf()
		n, rerr = readFD(fd, *b)
		if errors.Is(rerr, syscall.EAGAIN) {
			putReadBuf(b)
			b = nil
			return false // nothing yet: wait through the poller, holding nothing
		}
		return true
	})
	if n, err = c.result(n, err, rerr); n == 0 && b != nil {
		putReadBuf(b)
		b = nil
	}
	return b, n, err
}

func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// result turns a raw read's outcome into Read's: the poller's error
// (deadline, closed), the read's errno, or io.EOF for a read of nothing.
func (c *conn) result(n int, err, rerr error) (int, error) {
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case rerr != nil:
		return 0, c.opError("read", os.NewSyscallError("read", rerr))
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}
