package main

import (
	"bytes"
	"io"
	"sync"
)

var mu sync.Mutex

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
