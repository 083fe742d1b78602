package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/gateway/usagelog"
	"github.com/modelgate/modelgate/test/framework"
)

// Stack is framework.StartStack's system (envtest control plane, ledger,
// controllers, gateway on loopback) with the production mirror period (the
// test default of 1 s keeps the ApiToken controller rewriting 10 000
// statuses all run long) and a seeding client without client-side limits.
type Stack struct {
	*framework.Stack
}

// StackOptions configure StartStack.
type StackOptions struct {
	DSN        string // empty: SQLite file in Dir
	Dir        string
	SyncPeriod time.Duration // 0: controllers.DefaultBalanceSyncPeriod
	// UsageDurability of the gateway's usage writer (default: disk).
	UsageDurability usagelog.Durability
	// MoreDurabilities adds a gateway replica per entry, with that usage
	// durability, on the same control plane and ledger (Stack.MoreURLs).
	MoreDurabilities []usagelog.Durability
}

// StartStack starts the whole system and waits until the gateway is ready.
func StartStack(o StackOptions) (*Stack, error) {
	sync := o.SyncPeriod
	if sync <= 0 {
		sync = controllers.DefaultBalanceSyncPeriod
	}
	var more []framework.GatewayOptions
	for i, d := range o.MoreDurabilities {
		more = append(more, framework.GatewayOptions{ReplicaID: fmt.Sprintf("bench-%d", i+2), UsageDurability: d})
	}
	fs, err := framework.StartStack(framework.StackOptions{DSN: o.DSN, Dir: o.Dir, SyncPeriod: sync, ManagerQPS: 1000,
		UsageDurability: o.UsageDurability, MoreGateways: more})
	if err != nil {
		return nil, err
	}
	// The seeding client writes with many goroutines: no client-side limit.
	cfg := rest.CopyConfig(fs.Config)
	cfg.QPS, cfg.Burst = -1, 0
	if fs.Client, err = client.New(cfg, client.Options{Scheme: fs.Scheme}); err != nil {
		_ = fs.Stop()
		return nil, err
	}
	return &Stack{fs}, nil
}

// CountUsageRows counts the ledger's usage rows through a connection of its
// own (read-only for SQLite).
func CountUsageRows(ctx context.Context, dsn string) (int64, error) {
	var db *sql.DB
	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		path := strings.TrimPrefix(dsn, "sqlite://")
		db, err = sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err = sql.Open("pgx", dsn)
	default:
		return 0, fmt.Errorf("unsupported DSN %q", dsn)
	}
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM usage_logs").Scan(&n)
	return n, err
}

// TempDir makes a scratch directory for the ledger, spool and blobs.
func TempDir() (string, error) { return os.MkdirTemp("", "modelgate-bench-") }
