//go:build !linux

package usagelog

import "os"

func syncData(f *os.File) error { return f.Sync() }
