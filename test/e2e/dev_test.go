package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/keys"
	"github.com/modelgate/modelgate/gateway/platform/devenv"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/test/framework"
)

// buildBinary compiles modelgate once per test binary.
func buildBinary(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "modelgate")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = framework.RepoRoot()
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build modelgate: %v", err)
	}
	return out
}

// devProcess is a running `modelgate dev`.
type devProcess struct {
	cmd  *exec.Cmd
	info devenv.Info
	log  string
}

func startDev(t testing.TB, bin, dataDir string, extra ...string) *devProcess {
	t.Helper()
	g := NewWithT(t)
	assets, err := framework.AssetsDir()
	g.Expect(err).NotTo(HaveOccurred())
	root := framework.RepoRoot()
	logPath := filepath.Join(t.TempDir(), "dev.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	_ = os.Remove(filepath.Join(dataDir, "dev.json"))
	cmd := exec.Command(bin, "dev", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--assets-dir", assets,
		"--crd-dir", filepath.Join(root, "config", "crd", "bases"),
		"--samples-dir", filepath.Join(root, "config", "samples"))
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	p := &devProcess{cmd: cmd, log: logPath}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	g.Eventually(func() error {
		b, err := os.ReadFile(filepath.Join(dataDir, "dev.json"))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &p.info)
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "dev.json never appeared; log: %s", p.tail())
	return p
}

func (p *devProcess) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// children lists the PIDs whose parent is pid (etcd and kube-apiserver).
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// Fields after the command name in parentheses: state ppid ...
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, child)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	return !strings.HasPrefix(rest, "Z") // a zombie has exited
}

func (p *devProcess) stop(t testing.TB) {
	t.Helper()
	g := NewWithT(t)
	kids := children(p.cmd.Process.Pid)
	g.Expect(len(kids)).To(BeNumerically(">=", 2), "etcd and kube-apiserver should be children of dev")
	g.Expect(p.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	g.Eventually(done, time.Minute).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred(), "dev should exit cleanly on Ctrl-C; log: %s", p.tail())
	for _, k := range kids {
		g.Eventually(func() bool { return alive(k) }, 10*time.Second).Should(BeFalse(), "child %d outlived dev", k)
	}
}

var _ = Describe("modelgate dev", Serial, Label("process"), func() {
	It("dev starts the whole system and stops cleanly", func() {
		t := GinkgoTB()
		if testing.Short() {
			Skip("starts a control plane")
		}
		g := NewWithT(t)
		bin := buildBinary(t)
		dataDir := t.TempDir()

		pprofAddr := freeLoopbackAddr(g)
		p := startDev(t, bin, dataDir, "--pprof-bind-address", pprofAddr)
		g.Expect(p.info.Missing()).To(BeEmpty(), "dev.json is incomplete: %+v", p.info)
		g.Expect(goroutineProfile(pprofAddr)).To(ContainSubstring("goroutine profile:"), "--pprof-bind-address serves profiles")
		g.Expect(keys.ValidAPIKey(p.info.APIKey)).To(BeTrue())

		resp, err := http.Get(p.info.GatewayURL + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

		// The kubeconfig works: list the demo token through it.
		cfg, err := clientcmd.BuildConfigFromFlags("", p.info.Kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		kc, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
		g.Expect(err).NotTo(HaveOccurred())
		tok := &v1.ApiToken{}
		g.Expect(kc.Get(t.Context(), client.ObjectKey{Namespace: p.info.TenantNamespace, Name: p.info.TokenName}, tok)).To(Succeed())
		g.Expect(tok.Status.KeyHash).To(Equal(keys.Hash(p.info.APIKey)))
		first := p.info
		p.stop(t)
		_, err = goroutineProfile(pprofAddr)
		g.Expect(err).To(HaveOccurred(), "the pprof endpoint stops with dev")

		// A second run reuses the data directory: same account, same key.
		p = startDev(t, bin, dataDir)
		g.Expect(p.info.UserID).To(Equal(first.UserID))
		g.Expect(p.info.TokenID).To(Equal(first.TokenID))
		g.Expect(p.info.APIKey).To(Equal(first.APIKey))
		p.stop(t)
	})
})

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr(g Gomega) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().String()
}

// goroutineProfile fetches the text goroutine profile from a pprof address.
func goroutineProfile(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
