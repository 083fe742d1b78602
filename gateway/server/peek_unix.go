//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
)

// peekReadable waits, through the runtime's poller, until the socket has a
// byte to read, and leaves it there (MSG_PEEK): the connection goes back to
// the server as it is, with nothing read ahead. handled is false for a
// connection that is not a socket.
func peekReadable(conn net.Conn) (ok, handled bool) {
	sc, isSocket := conn.(syscall.Conn)
	if !isSocket {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, perr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EINTR) {
			return false // nothing yet: wait until readable (or the deadline)
		}
		ok = n == 1 && perr == nil // 0: the client closed
		return true
	})
	return ok && err == nil, true
}
