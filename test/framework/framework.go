package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

// Named timeouts for Eventually/Consistently, so suites agree on patience.
const (
	Timeout     = 20 * time.Second
	LongTimeout = 60 * time.Second
	Interval    = 100 * time.Millisecond
	// ConsistentlyDuration is how long a must-not-happen is watched.
	ConsistentlyDuration = 2 * time.Second
)

// RepoRoot is the repository's top directory, found from this file's path.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir is where kube-apiserver and etcd are: $KUBEBUILDER_ASSETS, or the
// directory hack/tools.sh builds them into.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "tools.sh"), "envtest-dir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh envtest-dir: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("no kube-apiserver in %s: run `make envtest` (or `make test`) first", dir)
	}
	return dir, nil
}

// Scheme knows the core kinds and modelgate's kinds.
func Scheme() *k8sruntime.Scheme { return kubescheme.New() }

// Env is a running control plane with a client.
type Env struct {
	Environment *envtest.Environment
	Config      *rest.Config
	Client      client.Client
	Scheme      *k8sruntime.Scheme
	// Served is the informer cache a gateway of this control plane serves
	// from (a Stack's own); nil when none runs here. NewAccount waits until
	// it holds the account ready, since the API server says so a watch
	// event earlier and a key used in between is unknown to the gateway.
	Served client.Reader
	// Guard lets tenant-chosen URLs reach loopback, where the tests'
	// webhook receivers, image servers and fake upstreams listen, as
	// --allow-private-networks=127.0.0.1/32,::1 would: the guard of every
	// system a test builds on this control plane.
	Guard *netguard.Guard
}

// LoopbackGuard is a network guard that also allows loopback addresses.
func LoopbackGuard() *netguard.Guard {
	g := &netguard.Guard{}
	g.AllowLoopback()
	return g
}

// Start starts etcd and kube-apiserver with the generated CRDs installed.
func Start() (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	scheme := Scheme()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
		// kube-apiserver drains for a while on SIGTERM; on a busy 2-core
		// machine that can exceed envtest's 20 s default.
		ControlPlaneStopTimeout: time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a half-started control plane must not outlive the suite
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c, Scheme: scheme, Guard: LoopbackGuard()}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.Environment.Stop() }

// NewNamespace returns a namespace with a generated name, one per spec.
func NewNamespace(prefix string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
}
