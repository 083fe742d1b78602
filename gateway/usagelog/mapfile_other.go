//go:build !linux

package usagelog

import "os"

// mapJournal maps journal files on Linux only; elsewhere appends are
// pwrite calls.
func mapJournal(*os.File) []byte { return nil }

func unmapJournal([]byte) {}
