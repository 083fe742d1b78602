//go:build !unix

package h1

// readInto sends the request write left pending, then reads once into p.
func (c *conn) readInto(p []byte) (int, error) {
	if rest := c.pending; rest != nil {
		c.pending = nil
		if err := c.send(rest); err != nil {
			return 0, err
		}
	}
	return c.nc.Read(p)
}

// readPooled reads once into a buffer from the pool (held while the read
// waits, where the poller cannot be reached without one).
func (c *conn) readPooled() (*[]byte, int, error) { return readPooledPlain(c) }
