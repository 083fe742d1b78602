//go:build !unix

package h1

// readInto reads once into p.
func (c *conn) readInto(p []byte) (int, error) { return c.nc.Read(p) }

// sendAndAwait writes a small request (the poller cannot be reached here).
func (c *conn) sendAndAwait(p []byte) error { return c.send(p) }

// readPooled reads once into a buffer from the pool (held while the read
// waits, where the poller cannot be reached without one).
func (c *conn) readPooled() (*[]byte, int, error) { return readPooledPlain(c) }
