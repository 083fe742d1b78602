package devenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StopChildren ends this process's child processes and their process
// groups: SIGTERM, then SIGKILL for whatever is left after grace. envtest
// starts etcd and kube-apiserver in process groups of their own, so a
// terminal's Ctrl-C never reaches them; a forced exit of `modelgate dev` must
// stop them itself. It reads /proc and does nothing where there is none.
func StopChildren(grace time.Duration) []int {
	kids := children(os.Getpid())
	for _, pid := range kids {
		_ = syscall.Kill(-pid, syscall.SIGTERM) // the group: each child leads its own
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, pid := range kids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return kids
}

// children lists the PIDs whose parent is ppid.
func children(ppid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may contain spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		if parent, err := strconv.Atoi(f[1]); err == nil && parent == ppid {
			if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// alive reports whether pid still runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if end := strings.LastIndexByte(s, ')'); end >= 0 {
		if f := strings.Fields(s[end+1:]); len(f) > 0 && f[0] == "Z" {
			return false
		}
	}
	return true
}
