//go:build unix

package sockpeek

import (
	"errors"
	"net"
	"syscall"
)

func peek(conn net.Conn, wait bool) State {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return Unsupported
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Unsupported
	}
	state := Closed
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, perr := recvPeek(fd, b[:])
		switch {
		case errors.Is(perr, syscall.EAGAIN) && wait:
			return false // nothing yet: the poller waits until readable
		case errors.Is(perr, syscall.EAGAIN):
			state = Quiet
		case perr == nil && n == 1:
			state = Data
		} // 0 bytes: the peer closed; another error: the socket failed
		return true
	})
	if err != nil {
		return Closed
	}
	return state
}

// recvPeek peeks without blocking, past interrupted calls.
func recvPeek(fd uintptr, b []byte) (int, error) {
	for {
		n, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}
