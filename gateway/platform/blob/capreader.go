package blob

import (
	"errors"
	"io"
)

// errOverCap ends a capped stream; callers look at CapReader.Over.
var errOverCap = errors.New("blob: stream over its size cap")

// CapReader reads R and fails as soon as more than Left bytes came, so a Put
// of an oversized stream stops at the cap and leaves no object (a failed Put
// is atomic). Over reports that case; ReadErr keeps a failure of R itself.
type CapReader struct {
	R       io.Reader
	Left    int64
	Over    bool
	ReadErr error
}

func (c *CapReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.Left+1 {
		p = p[:c.Left+1]
	}
	n, err := c.R.Read(p)
	c.Left -= int64(n)
	if c.Left < 0 {
		c.Over = true
		return 0, errOverCap
	}
	if err != nil && err != io.EOF {
		c.ReadErr = err
	}
	return n, err
}
