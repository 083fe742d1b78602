//go:build !unix

package h1

// readInto reads once into p.
func (c *conn) readInto(p []byte) (int, error) { return c.nc.Read(p) }

// readPooled reads once into a buffer from the pool (held while the read
// waits, where the poller cannot be reached without one).
func (c *conn) readPooled() (*[]byte, int, error) { return readPooledPlain(c) }
