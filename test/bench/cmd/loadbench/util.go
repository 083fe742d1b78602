package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var mu sync.Mutex

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// childrenCPU is the CPU time (user + system) that this process's running
// children have used so far: the kube-apiserver and etcd envtest started.
// Read from /proc; zero where there is none.
func childrenCPU() time.Duration {
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	var ticks int64
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: comm may hold spaces, so the
		// fields are counted after its closing parenthesis.
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// userHZ is the unit of /proc's CPU times: 100 on every Linux build the
// harness runs on.
const userHZ = 100
