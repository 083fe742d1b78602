// Package devenv runs the embedded development control plane: etcd and
// kube-apiserver from bin/ (built by hack/tools.sh), with modelgate's CRDs
// installed, a kubeconfig for kubectl, and the sample objects applied.
package devenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure the control plane.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd.
	AssetsDir string
	// DataDir keeps etcd's data between runs (DataDir/etcd) and receives the
	// kubeconfig (DataDir/kubeconfig).
	DataDir string
	// CRDDir holds the CRD manifests (config/crd/bases).
	CRDDir string
}

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	env *envtest.Environment
	// Config is an administrator's client config.
	Config *rest.Config
	// KubeconfigPath is where a kubeconfig for kubectl was written.
	KubeconfigPath string
}

// Start starts etcd (data kept in DataDir/etcd) and kube-apiserver, installs
// the CRDs and writes DataDir/kubeconfig.
func Start(o Options) (*ControlPlane, error) {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(o.AssetsDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make envtest` (hack/tools.sh envtest) first", bin, o.AssetsDir)
		}
	}
	etcdDir := filepath.Join(o.DataDir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return nil, err
	}
	// etcd and kube-apiserver start through a wrapper that ties their life
	// to this process: if `modelgate dev` is SIGKILLed they die with it
	// instead of holding the data directory and their ports as orphans.
	assets, err := wrapAssets(o.AssetsDir, filepath.Join(o.DataDir, "bin"))
	if err != nil {
		return nil, fmt.Errorf("control-plane wrapper: %w", err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{o.CRDDir},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// kube-apiserver drains for a while on SIGTERM; on a busy 2-core
		// machine that can exceed envtest's 20 s default.
		ControlPlaneStopTimeout: time.Minute,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // do not leave a half-started etcd behind
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cp := &ControlPlane{env: env, Config: cfg, KubeconfigPath: filepath.Join(o.DataDir, "kubeconfig")}
	if err := cp.writeKubeconfig(); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// writeKubeconfig writes an administrator kubeconfig for kubectl.
func (cp *ControlPlane) writeKubeconfig() error {
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: "modelgate-dev", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add kubeconfig user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubeconfig: %w", err)
	}
	if err := os.WriteFile(cp.KubeconfigPath, kc, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Stop stops kube-apiserver and etcd; etcd's data stays in DataDir.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

// EnsureNamespace creates a namespace if it does not exist.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// ApplyDir server-side-applies every object of the YAML files in dir
// (kustomization.yaml excepted), namespaces first, so a second run changes
// nothing: the same manifests applied twice are a no-op, as under GitOps.
// It returns the objects as applied.
func ApplyDir(ctx context.Context, c client.Client, dir string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(dir)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("modelgate-dev"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return objs, nil
}

// ReadManifests decodes the YAML files of dir into objects, namespaces first.
func ReadManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		docs, err := decodeFile(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		return objs[i].GetKind() == "Namespace" && objs[j].GetKind() != "Namespace"
	})
	return objs, nil
}

func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}
