package devenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// wrapEnv carries the real assets directory to a control-plane child started
// through the parent-death wrapper.
const wrapEnv = "MODELGATE_DEV_CHILD_ASSETS"

var wrapped = []string{"etcd", "kube-apiserver"}

// RunWrappedChild turns this process into etcd or kube-apiserver when it was
// started under one of those names by the wrapper of Start: it asks the
// kernel to SIGKILL it when `modelgate dev` dies (however it dies, SIGKILL
// included), then execs the real binary, which keeps that setting. It
// returns only when the process is not such a child. Call it first thing in
// main.
func RunWrappedChild() {
	dir := os.Getenv(wrapEnv)
	name := filepath.Base(os.Args[0])
	if dir == "" || !isWrapped(name) {
		return
	}
	if err := execWithParentDeath(filepath.Join(dir, name), os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "modelgate: start %s: %v\n", name, err)
		os.Exit(1)
	}
}

func isWrapped(name string) bool {
	for _, w := range wrapped {
		if name == w {
			return true
		}
	}
	return false
}

// wrapAssets makes dir/<name> links to this executable for etcd and
// kube-apiserver, so that envtest starts them through RunWrappedChild, and
// returns dir; on systems without parent-death signals it returns assets.
func wrapAssets(assets, dir string) (string, error) {
	if !parentDeathSupported {
		return assets, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, name := range wrapped {
		link := filepath.Join(dir, name)
		_ = os.Remove(link)
		if err := os.Symlink(self, link); err != nil {
			return "", err
		}
	}
	if err := os.Setenv(wrapEnv, assets); err != nil {
		return "", err
	}
	// envtest prefers these variables to BinaryAssetsDirectory: point them
	// at the wrappers too.
	if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
		return "", err
	}
	for _, v := range []string{"TEST_ASSET_ETCD", "TEST_ASSET_KUBE_APISERVER"} {
		_ = os.Unsetenv(v)
	}
	return dir, nil
}
