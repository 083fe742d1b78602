package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyDryRun server-side applies every object with dryRun=All, so the real
// API server validates it against its real schema (OpenAPI for built-in
// kinds, the installed CRDs for modelgate's). Namespaces are created for real
// first because namespaced objects need them even in a dry run.
func applyDryRun(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if failures := dryRun(t, objs); len(failures) > 0 {
		t.Fatalf("%d of %d objects rejected by the API server:\n%s", len(failures), len(objs), strings.Join(failures, "\n"))
	}
	t.Logf("%d objects accepted by a server-side apply dry run: %v", len(objs), kinds(objs))
}

// dryRun returns one line per object the API server refused.
func dryRun(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	namespaces := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			namespaces[o.GetName()] = true
		} else if ns := o.GetNamespace(); ns != "" {
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}

	var failures []string
	for _, o := range objs {
		namespaced, err := k8s.IsObjectNamespaced(o)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s %s: unknown kind: %v", o.GetKind(), o.GetName(), err))
			continue
		}
		if namespaced && o.GetNamespace() == "" {
			failures = append(failures, fmt.Sprintf("%s %s: namespaced but rendered without a namespace", o.GetKind(), o.GetName()))
			continue
		}
		err = k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.DryRunAll, client.ForceOwnership, client.FieldOwner("modelgate-deploy-test"))
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	return failures
}

// TestDryRunCatchesInvalidObjects: the dry run is a real check, not a
// formality: a misspelt field, a bad value and a CEL violation are refused.
func TestDryRunCatchesInvalidObjects(t *testing.T) {
	objs, err := decode([]byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: typo, namespace: modelgate-system}
spec:
  replicaz: 2
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: x, image: x}]}
---
apiVersion: v1
kind: Service
metadata: {name: bad-port, namespace: modelgate-system}
spec:
  ports: [{name: http, port: 700000}]
---
apiVersion: modelgate.io/v1alpha1
kind: ApiToken
metadata: {name: both-keys, namespace: modelgate-system}
spec:
  displayName: x
  keyHash: abc
  keySecretRef: {name: s, key: k}
`))
	if err != nil {
		t.Fatal(err)
	}
	failures := dryRun(t, objs)
	g := NewWithT(t)
	g.Expect(failures).To(HaveLen(3))
	g.Expect(failures[0]).To(ContainSubstring("replicaz"))
	g.Expect(failures[1]).To(ContainSubstring("700000"))
	g.Expect(failures[2]).To(ContainSubstring("set at most one of keySecretRef or keyHash"))
}

func TestHelmLint(t *testing.T) {
	needTool(t, "helm", helmBin)
	for _, args := range [][]string{
		{"lint", "charts/modelgate", "--strict"},
		{"lint", "charts/modelgate", "--strict", "-f", "test/deploy/testdata/full-values.yaml"},
	} {
		if out, err := runTool(helmBin, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

func TestHelmTemplateDefaultValues(t *testing.T) {
	g := NewWithT(t)
	objs := helmTemplate(t)
	g.Expect(kinds(objs)).To(And(
		HaveKeyWithValue("CustomResourceDefinition", 6),
		HaveKeyWithValue("Deployment", 2),
		HaveKeyWithValue("ServiceAccount", 2),
		HaveKeyWithValue("ClusterRole", 2),
		HaveKeyWithValue("Role", 2),
		HaveKeyWithValue("PodDisruptionBudget", 2),
	))
	g.Expect(kinds(objs)).NotTo(Or(HaveKey("HorizontalPodAutoscaler"), HaveKey("NetworkPolicy"),
		HaveKey("ServiceMonitor"), HaveKey("PersistentVolumeClaim")))

	mgr := find(objs, "Deployment", "modelgate-manager")
	g.Expect(mgr).NotTo(BeNil())
	g.Expect(nested(mgr, "spec", "replicas")).To(BeEquivalentTo(2))
	g.Expect(container(mgr)["args"]).To(ContainElement("--leader-elect=true"))

	gw := find(objs, "Deployment", "modelgate-gateway")
	g.Expect(gw).NotTo(BeNil())
	g.Expect(nested(gw, "spec", "replicas")).To(BeEquivalentTo(2))
	g.Expect(nested(gw, "spec", "template", "spec", "terminationGracePeriodSeconds")).To(BeEquivalentTo(45))
	g.Expect(container(gw)["args"]).To(ContainElement("--shutdown-grace=30s"))
	g.Expect(envNames(gw)).To(ContainElements("MODELGATE_DATABASE_URL", "MODELGATE_SYSTEM_NAMESPACE",
		"MODELGATE_SPOOL_DIR", "MODELGATE_BLOB_DIR", "POD_NAME"))
	g.Expect(nested(gw, "spec", "template", "spec", "topologySpreadConstraints")).To(HaveLen(2))
	svc := find(objs, "Service", "modelgate-gateway")
	g.Expect(svc).NotTo(BeNil())
	g.Expect(nested(svc, "spec", "ports")).To(ConsistOf(Not(HaveKey("appProtocol"))))

	applyDryRun(t, objs)
}

func TestHelmTemplateFullValues(t *testing.T) {
	g := NewWithT(t)
	objs := helmTemplate(t, "-f", "test/deploy/testdata/full-values.yaml")
	g.Expect(kinds(objs)).To(And(
		HaveKeyWithValue("HorizontalPodAutoscaler", 1),
		HaveKeyWithValue("NetworkPolicy", 2),
		HaveKeyWithValue("ServiceMonitor", 2),
		HaveKeyWithValue("PersistentVolumeClaim", 1),
	))

	gw := find(objs, "Deployment", "modelgate-gateway")
	g.Expect(gw).NotTo(BeNil())
	g.Expect(nested(gw, "spec", "replicas")).To(BeNil(), "the HPA owns replicas")
	g.Expect(container(gw)["image"]).To(Equal("registry.example.com/modelgate:1.2.3"))
	g.Expect(envNames(gw)).To(ContainElements("MODELGATE_BLOB_SIGNING_KEY", "MODELGATE_PUBLIC_URL", "POD_NAME"))
	svc := find(objs, "Service", "modelgate-gateway")
	g.Expect(svc).NotTo(BeNil())
	g.Expect(nested(svc, "spec", "ports")).To(ConsistOf(And(HaveKeyWithValue("name", "http"),
		HaveKeyWithValue("appProtocol", "kubernetes.io/h2c"))), "h2c on the API port, when asked for")
	mgr := find(objs, "Deployment", "modelgate-manager")
	g.Expect(envNames(mgr)).To(ContainElements("MODELGATE_BLOB_DIR", "MODELGATE_BLOB_SIGNING_KEY"),
		"the manager writes task outputs to the shared blob volume")

	applyDryRun(t, objs)
}

func TestHelmTemplateRefusesShortTerminationGrace(t *testing.T) {
	needTool(t, "helm", helmBin)
	_, err := runTool(helmBin, "template", "modelgate", "charts/modelgate",
		"--set", "gateway.shutdownGraceSeconds=60", "--set", "gateway.terminationGracePeriodSeconds=30")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(
		"gateway.terminationGracePeriodSeconds (30) must be greater than gateway.shutdownGraceSeconds (60)")))
}

func TestKustomizeDefault(t *testing.T) {
	objs := kustomizeBuild(t, "config/default")
	g := NewWithT(t)
	g.Expect(kinds(objs)).To(And(
		HaveKeyWithValue("CustomResourceDefinition", 6),
		HaveKeyWithValue("Deployment", 2),
		HaveKeyWithValue("PodDisruptionBudget", 2),
	))
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			g.Expect(ns).To(Equal(SystemNamespace), "%s %s", o.GetKind(), o.GetName())
		}
	}
	applyDryRun(t, objs)
}

func TestKustomizeDev(t *testing.T) {
	objs := kustomizeBuild(t, "config/dev")
	g := NewWithT(t)
	g.Expect(kinds(objs)).NotTo(HaveKey("PodDisruptionBudget"))
	for _, name := range []string{"modelgate-manager", "modelgate-gateway"} {
		d := find(objs, "Deployment", name)
		g.Expect(d).NotTo(BeNil(), name)
		g.Expect(nested(d, "spec", "replicas")).To(BeEquivalentTo(1), name)
		g.Expect(container(d)["args"]).To(ContainElement("--dev-logs"), name)
		g.Expect(container(d)["image"]).To(Equal("modelgate:dev"), name)
	}
	g.Expect(container(find(objs, "Deployment", "modelgate-manager"))["args"]).To(ContainElement("--leader-elect=false"))
	g.Expect(container(find(objs, "Deployment", "modelgate-gateway"))["args"]).To(ContainElement("--shutdown-grace=5s"))
	applyDryRun(t, objs)
}

// nested returns a field of an object, nil when absent.
func nested(o *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	return v
}

// container returns the first container of a Deployment.
func container(d *unstructured.Unstructured) map[string]any {
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return nil
	}
	return cs[0].(map[string]any)
}

func envNames(d *unstructured.Unstructured) []string {
	var names []string
	env, _ := container(d)["env"].([]any)
	for _, e := range env {
		names = append(names, e.(map[string]any)["name"].(string))
	}
	return names
}
