//go:build !unix

package sockpeek

import "net"

func peek(net.Conn, bool) State { return Unsupported }
