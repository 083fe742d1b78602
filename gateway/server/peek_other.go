//go:build !unix

package server

import "net"

// peekReadable cannot peek here: awaitReadable reads a byte instead.
func peekReadable(net.Conn) (ok, handled bool) { return false, false }
