package devenv

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const parentDeathSupported = true

// execWithParentDeath sets PR_SET_PDEATHSIG to SIGKILL and execs bin. The
// setting survives execve, so the control-plane process dies with its
// parent. If the parent already died before the prctl, exit at once.
func execWithParentDeath(bin string, argv []string) error {
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return err
	}
	if os.Getppid() != parent {
		os.Exit(1)
	}
	return syscall.Exec(bin, argv, os.Environ())
}
