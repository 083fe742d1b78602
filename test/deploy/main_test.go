package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/framework"
)

// SystemNamespace is the release namespace every render uses.
const SystemNamespace = "modelgate-system"

var (
	env  *framework.Env
	k8s  client.Client
	root = framework.RepoRoot()

	// helmBin and kustomizeBin are empty when the tool could not be installed;
	// toolSkip says why.
	helmBin, kustomizeBin string
	toolSkip              = map[string]string{}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	helmBin = ensureTool("helm")
	kustomizeBin = ensureTool("kustomize")

	var err error
	if env, err = framework.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "test/deploy: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := setup(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "test/deploy: setup: %v\n", err)
		return 1
	}
	return m.Run()
}

// setup creates the system namespace and the stand-in Prometheus Operator CRDs.
func setup(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if err := standInCRD(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

// standInCRD creates the stand-in CRD of a Prometheus Operator kind from
// testdata and waits until the API server serves it.
func standInCRD(ctx context.Context, kind string) error {
	data, err := os.ReadFile(filepath.Join("testdata", strings.ToLower(kind)+"-crd.yaml"))
	if err != nil {
		return err
	}
	objs, err := decode(data)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("monitoring.coreos.com/v1")
		list.SetKind(kind + "List")
		err := k8s.List(ctx, list, client.InNamespace(SystemNamespace))
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s CRD not served: %w", kind, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureTool installs a pinned tool into bin/ with hack/tools.sh (a copy
// from the per-user cache when there is one) and returns its path, or ""
// when it cannot be had: tests that need it then skip, loudly.
func ensureTool(name string) string {
	cmd := exec.Command(filepath.Join(root, "hack", "tools.sh"), name)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		toolSkip[name] = fmt.Sprintf("hack/tools.sh %s failed: %v\n%s", name, err, tail(out.String(), 2000))
		fmt.Fprintf(os.Stderr, "test/deploy: WARNING: %s is not available, tests that need it will skip\n%s\n", name, toolSkip[name])
		return ""
	}
	return filepath.Join(root, "bin", name)
}

// needTool skips the test when a tool is missing, and fails it under CI.
func needTool(t *testing.T, name, path string) {
	t.Helper()
	if path != "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required when CI=true: %s", name, toolSkip[name])
	}
	t.Skipf("SKIPPED: %s is not available: %s", name, toolSkip[name])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// runTool runs a tool from the repository root and returns stdout; the error
// carries stderr.
func runTool(bin string, args ...string) ([]byte, error) {
	return runToolEnv(nil, bin, args...)
}

// runToolEnv is runTool with extra environment variables.
func runToolEnv(extraEnv []string, bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// helmTemplate renders the chart (CRDs included) as release "modelgate" in
// the system namespace with the given extra arguments.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	needTool(t, "helm", helmBin)
	base := []string{"template", "modelgate", "charts/modelgate", "--namespace", SystemNamespace, "--include-crds"}
	out, err := runTool(helmBin, append(base, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("decode helm output: %v", err)
	}
	return objs
}

func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	needTool(t, "kustomize", kustomizeBin)
	out, err := runTool(kustomizeBin, "build", dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("decode kustomize output: %v", err)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
}

// find returns the rendered object of a kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	return n
}
