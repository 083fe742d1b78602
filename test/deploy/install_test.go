package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestHelmInstallDryRunAndNotes runs `helm install --dry-run=server` against
// the envtest API server and checks that the NOTES tell the installer how to
// make a first tenant and key, and that the YAML they show is accepted.
func TestHelmInstallDryRunAndNotes(t *testing.T) {
	needTool(t, "helm", helmBin)
	g := NewWithT(t)

	admin, err := env.Environment.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := admin.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600)).To(Succeed())
	helmEnv := []string{
		"KUBECONFIG=" + filepath.Join(dir, "kubeconfig"),
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
	}

	out, err := runToolEnv(helmEnv, helmBin, "install", "modelgate", "charts/modelgate",
		"--namespace", SystemNamespace, "--dry-run=server")
	g.Expect(err).NotTo(HaveOccurred())
	_, notes, found := strings.Cut(string(out), "\nNOTES:\n")
	g.Expect(found).To(BeTrue(), "no NOTES in:\n%s", out)
	g.Expect(notes).To(And(
		ContainSubstring("kind: Tenant"),
		ContainSubstring("kind: ApiToken"),
		ContainSubstring("jsonpath='{.status.secretName}'"),
		ContainSubstring("create secret generic modelgate-database"),
		ContainSubstring("blobs.signingKey.existingSecret is not set"),
	))

	// The first-tenant YAML of the NOTES is valid against the real CRDs.
	_, rest, _ := strings.Cut(notes, "<<'YAML'\n")
	doc, _, found := strings.Cut(rest, "\nYAML\n")
	g.Expect(found).To(BeTrue(), "no YAML here-document in the NOTES:\n%s", notes)
	objs, err := decode([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(objs)).To(Equal(map[string]int{"Tenant": 1, "ApiToken": 1}))
	applyDryRun(t, objs)

	// With a signing key there is no warning.
	out, err = runToolEnv(helmEnv, helmBin, "install", "modelgate", "charts/modelgate",
		"--namespace", SystemNamespace, "--dry-run=server", "--set", "blobs.signingKey.existingSecret=modelgate-blobs")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).NotTo(ContainSubstring("signingKey.existingSecret is not set"))
}
