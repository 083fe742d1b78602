package wire

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

var (
	spoolLocksMu sync.Mutex
	spoolLocks   = map[string]*os.File{} // held for the life of the process
)

// lockSpool takes an exclusive lock next to the usage spool, so that a
// second live process with the same data directory and replica name fails
// at start instead of interleaving rows into the first one's journal. The
// kernel drops the lock when the process dies, however it dies, so the next
// run can take over (and replay) the spool. A process that opens its own
// spool again (tests start several gateways) reuses its lock.
func lockSpool(spoolPath string) error {
	spoolLocksMu.Lock()
	defer spoolLocksMu.Unlock()
	lockPath := spoolPath + ".lock"
	if _, held := spoolLocks[lockPath]; held {
		return nil
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("usage spool lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("usage spool %s is in use by another running gateway: give each replica its own data directory or POD_NAME", spoolPath)
		}
		return fmt.Errorf("usage spool lock: %w", err)
	}
	spoolLocks[lockPath] = f
	return nil
}
