package devenv

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A child in its own process group, as envtest starts etcd and
// kube-apiserver, is stopped, together with its own child.
func TestStopChildrenEndsChildProcessGroups(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var grandchild int
	for deadline := time.Now().Add(5 * time.Second); grandchild == 0 && time.Now().Before(deadline); {
		if kids := children(cmd.Process.Pid); len(kids) > 0 {
			grandchild = kids[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("the sleep did not start")
	}

	stopped := StopChildren(2 * time.Second)
	if !slices.Contains(stopped, cmd.Process.Pid) {
		t.Fatalf("stopped %v, want the child %d among them", stopped, cmd.Process.Pid)
	}
	select {
	case err := <-done:
		t.Logf("the child ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the child still runs")
	}
	for deadline := time.Now().Add(5 * time.Second); alive(grandchild) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(grandchild) {
		t.Fatalf("the child's own child %d still runs: its process group was not signalled", grandchild)
	}
}
