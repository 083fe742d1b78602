// Package sockpeek looks at a socket's next byte without reading it
// (MSG_PEEK), through the runtime's poller: whether a connection kept
// between requests has a request waiting, has been closed by its peer, or
// is quiet. The server waits this way for a detached connection's next
// request; the plain-HTTP upstream client checks an idle connection before
// it reuses it.
package sockpeek

import "net"

// State is what a peek found.
type State int8

const (
	// Unsupported: not a socket, or no MSG_PEEK on this platform.
	Unsupported State = iota
	// Quiet: nothing to read yet (Now only).
	Quiet
	// Data: a byte is waiting to be read.
	Data
	// Closed: the peer closed the connection, the socket failed, or the
	// wait ended (deadline, connection closed here).
	Closed
)

// Wait blocks until conn has something to read (or its read deadline
// passes) and says what.
func Wait(conn net.Conn) State { return peek(conn, true) }

// Now says what conn has to read, without waiting.
func Now(conn net.Conn) State { return peek(conn, false) }
