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
