package usagelog

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapJournal maps the first fileSize bytes of a journal file for appends
// without a sync (DurableProcess), or returns nil, and the appends stay
// pwrite calls. Its blocks are allocated first: a store into a page of a
// sparse file that the disk has no room for raises SIGBUS, where pwrite
// would return ENOSPC; a file system without fallocate is not mapped.
func mapJournal(f *os.File) []byte {
	var mem []byte
	_ = withFD(f, func(fd int) {
		if unix.Fallocate(fd, 0, 0, fileSize) != nil {
			return
		}
		if m, err := unix.Mmap(fd, 0, fileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			mem = m
		}
	})
	return mem
}

func unmapJournal(mem []byte) { _ = unix.Munmap(mem) }
