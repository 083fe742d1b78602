//go:build unix

package h1

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// readInto reads once into p; a closed connection is io.EOF. The request
// that write left pending goes first, from inside the read's callback: once
// it is sent, the answer cannot be there yet, so the callback goes straight
// to the poller's wait instead of making a read that finds nothing. The
// poller's readiness was reset before the callback ran (RawRead), so the
// answer's arrival, which follows the write, always wakes the wait.
func (c *conn) readInto(p []byte) (int, error) {
	if c.raw == nil {
		return c.nc.Read(p)
	}
	var n int
	var rerr, werr error
	err := c.raw.Read(func(fd uintptr) bool {
		if c.pending != nil {
			werr = c.sendPending(fd)
			return werr != nil || c.pending != nil // failed, or the socket's buffer is full
		}
		n, rerr = readFD(fd, p)
		return !errors.Is(rerr, syscall.EAGAIN)
	})
	switch {
	case err == nil && werr != nil:
		c.pending = nil
		return 0, &nothingReadError{errBrokenConn("write", c.opError("write", os.NewSyscallError("write", werr)))}
	case err == nil && c.pending != nil: // the rest waits for room in the socket's buffer
		rest := c.pending
		c.pending = nil
		if err := c.send(rest); err != nil {
			return 0, err
		}
		return c.readInto(p)
	}
	return c.result(n, err, rerr)
}

// sendPending writes c.pending to fd without waiting; what the socket's
// buffer had no room for stays pending.
func (c *conn) sendPending(fd uintptr) error {
	for len(c.pending) > 0 {
		n, err := syscall.Write(int(fd), c.pending)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return nil
		case err != nil:
			return err
		case n == 0:
			return nil // no progress: send waits for room
		}
		c.pending = c.pending[n:]
	}
	c.pending = nil
	return nil
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
