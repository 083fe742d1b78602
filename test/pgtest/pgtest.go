// Package pgtest starts a throwaway PostgreSQL server for tests: one server
// per test binary, a fresh database per test.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
//	func TestX(t *testing.T) { dsn := pgtest.NewDatabase(t) ... }
//
// The server comes from initdb and pg_ctl found on PATH or under
// /usr/lib/postgresql/*/bin, runs on a free port of 127.0.0.1 with its data
// and socket in a temporary directory, and is removed when Run returns. As
// root (initdb refuses root) it runs as the "postgres" user. Set
// MODELGATE_PGTEST_DSN to use an already running server instead (its user
// must be allowed to CREATE DATABASE). When neither is available a test is
// skipped, or fails when CI=true.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver for CREATE DATABASE
)

// EnvDSN names an existing server to use instead of starting one.
const EnvDSN = "MODELGATE_PGTEST_DSN"

const (
	rootPattern = "modelgate-pgtest-"
	ownerFile   = "owner.pid"
)

// Server is a PostgreSQL server started for the tests.
type Server struct {
	binDir   string
	root     string // temp dir holding data/, sock/ and the log
	port     int
	cred     *syscall.Credential
	adminDSN string
	external bool
}

var (
	once     sync.Once
	shared   *Server
	startErr error
	dbSeq    atomic.Int64
)

// Run runs the tests of m and stops the shared server afterwards. Use it
// from TestMain.
func Run(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if err := shared.destroy(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: cleanup: %v\n", err)
		}
	}
	return code
}

// Shared returns the server of this test binary, starting it on first use.
// It skips t (or fails it under CI=true) when PostgreSQL is not available.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: PostgreSQL is required under CI=true: %v", startErr)
		}
		t.Skipf("pgtest: SKIPPING PostgreSQL tests: %v (install the postgresql package or set %s)", startErr, EnvDSN)
	}
	return shared
}

// NewDatabase creates an empty database on the shared server for t and
// returns its DSN (postgres://…). The database is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// FORCE ends connections a test left open (pools closed late).
		if err := s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return s.dsn(name)
}

// Stop stops the server (fault tests); Start starts it again on the same
// port and data.
func (s *Server) Stop() error {
	if s.external {
		return errors.New("pgtest: cannot stop an external server")
	}
	return s.pgctl("stop", "-m", "fast", "-w")
}

// Crash stops the server the way a crash would: `pg_ctl stop -m immediate`
// (no checkpoint, every connection cut at once).
func (s *Server) Crash() error {
	if s.external {
		return errors.New("pgtest: cannot stop an external server")
	}
	return s.pgctl("stop", "-m", "immediate", "-w")
}

// Start starts a stopped server again.
func (s *Server) Start() error {
	if s.external {
		return nil
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300",
		s.port, filepath.Join(s.root, "sock"))
	return s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.root, "server.log"), "-o", opts)
}

func start() (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s := &Server{adminDSN: dsn, external: true}
		return s, s.exec("SELECT 1")
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	reapOrphans(bin)
	s := &Server{binDir: bin}
	if err := s.initCluster(); err != nil {
		_ = s.destroy()
		return nil, err
	}
	if err := s.Start(); err != nil {
		_ = s.destroy()
		return nil, err
	}
	return s, nil
}

func (s *Server) initCluster() error {
	var err error
	if s.root, err = os.MkdirTemp("", rootPattern); err != nil {
		return err
	}
	for _, d := range []string{"data", "sock"} {
		if err := os.Mkdir(filepath.Join(s.root, d), 0o700); err != nil {
			return err
		}
	}
	// Record the owner so that a later run can stop this server if this test
	// binary dies without cleaning up (a panic, a timeout kill).
	if err := os.WriteFile(filepath.Join(s.root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := s.dropRoot(); err != nil {
			return err
		}
	}
	if s.port, err = freePort(); err != nil {
		return err
	}
	s.adminDSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	return s.run(filepath.Join(s.binDir, "initdb"), "-D", filepath.Join(s.root, "data"), "-U", "postgres",
		"--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
}

// dropRoot arranges for the server to run as the postgres user: initdb and
// postgres refuse to run as root.
func (s *Server) dropRoot() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return filepath.Walk(s.root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
}

func (s *Server) pgctl(args ...string) error {
	return s.run(filepath.Join(s.binDir, "pg_ctl"), append([]string{"-D", filepath.Join(s.root, "data")}, args...)...)
}

func (s *Server) run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.root
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.root, "server.log"))
		return fmt.Errorf("%s %s: %w\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), log)
	}
	return nil
}

func (s *Server) destroy() error {
	if s.external || s.root == "" {
		return nil
	}
	var errs []error
	if _, err := os.Stat(filepath.Join(s.root, "data", "postmaster.pid")); err == nil {
		errs = append(errs, s.pgctl("stop", "-m", "immediate", "-w"))
	}
	errs = append(errs, os.RemoveAll(s.root))
	return errors.Join(errs...)
}

func (s *Server) exec(stmt string) error {
	db, err := sql.Open("pgx", s.adminDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

func (s *Server) dsn(db string) string {
	u, err := url.Parse(s.adminDSN)
	if err != nil {
		return s.adminDSN
	}
	u.Path = "/" + db
	return u.String()
}

func findBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) > 0 {
		// Prefer the newest major version (numerically: 9 < 15).
		major := func(p string) int {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
			return n
		}
		slices.SortFunc(matches, func(a, b string) int { return major(a) - major(b) })
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("initdb/pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// reapOrphans stops and removes servers left by test binaries that died
// without cleanup: a server whose owner process no longer exists.
func reapOrphans(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), rootPattern+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || processAlive(pid) {
			continue
		}
		orphan := &Server{binDir: bin, root: dir}
		if info, err := os.Stat(dir); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid != 0 {
				orphan.cred = &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
			}
		}
		if err := orphan.destroy(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: reap %s: %v\n", dir, err)
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// StartServer starts a server of its own for a program that is not a test
// (the benchmark harness); Destroy removes it.
func StartServer() (*Server, error) { return start() }

// Destroy stops the server and removes its data (nothing for an external one).
func (s *Server) Destroy() error { return s.destroy() }

// CreateDatabase creates the database name and returns its DSN.
func (s *Server) CreateDatabase(name string) (string, error) {
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.dsn(name), nil
}
