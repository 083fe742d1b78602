// Command modelgate is the operator and gateway in one binary:
//
//	modelgate manager   the controllers (leader elected), health and metrics endpoints
//	modelgate gateway   the HTTP API, served from informer caches
//	modelgate dev       everything on embedded defaults: local control plane,
//	                    SQLite ledger, samples applied, manager and gateway in one process
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/pricing"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/shopspring/decimal"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/controllers"
	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/controllers/generationtask"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/housekeeping"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/platform/devenv"
	"github.com/modelgate/modelgate/gateway/platform/kubescheme"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/platform/telemetry"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tasks"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/usagelog"
	"github.com/modelgate/modelgate/gateway/wire"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

const usage = `modelgate: a Kubernetes operator and model gateway.

Usage:
  modelgate manager [flags]   run the controllers
  modelgate gateway [flags]   run the HTTP gateway
  modelgate dev [flags]       run everything locally on embedded defaults
  modelgate migrate [flags]   apply the ledger's migrations and exit
  modelgate version           print the version

Run 'modelgate <command> -h' for the flags of a command.
`

func main() {
	devenv.RunWrappedChild() // `modelgate dev` starts etcd and kube-apiserver through this binary
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var ctx context.Context
	if cmd == "dev" {
		ctx = devSignals()
	} else {
		ctx = ctrl.SetupSignalHandler()
	}
	var err error
	switch cmd {
	case "manager":
		err = runManager(ctx, args)
	case "gateway":
		err = runGateway(ctx, args)
	case "dev":
		err = runDev(ctx, args)
	case "migrate":
		err = runMigrate(ctx, args)
	case "version":
		fmt.Println(version)
		return
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "modelgate: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "modelgate %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// common are the flags every command shares.
type common struct {
	kubeconfig      string
	database        string
	systemNamespace string
	devLogs         bool
	pprofAddr       string
	egress          egressFlags
}

// registerPprof adds --pprof-bind-address: net/http/pprof on a private
// port for profiling a running process; off by default.
func registerPprof(fs *flag.FlagSet, addr *string) {
	fs.StringVar(addr, "pprof-bind-address", "", "address of the net/http/pprof endpoint (e.g. 127.0.0.1:6060); empty disables")
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path; empty means in-cluster")
	fs.StringVar(&c.database, "database", envOr("MODELGATE_DATABASE_URL", "sqlite://modelgate.db"),
		"ledger DSN: postgres://… or sqlite://path (env MODELGATE_DATABASE_URL)")
	fs.StringVar(&c.systemNamespace, "system-namespace", envOr("MODELGATE_SYSTEM_NAMESPACE", "modelgate-system"),
		"namespace of platform-wide ModelRoutes and PriceRules")
	fs.BoolVar(&c.devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	registerPprof(fs, &c.pprofAddr)
	c.egress.register(fs)
}

// egressFlags shape the process's outbound HTTP (wire.SystemOptions).
type egressFlags struct {
	// guard takes --allow-private-networks: CIDRs or addresses that tenant-
	// and client-chosen URLs (webhooks, reference images, output downloads)
	// may reach although they are not public (local development).
	guard *netguard.Guard
	// headerTimeout is --upstream-response-header-timeout: the ceiling on
	// the wait for an upstream's response headers, whatever the backend's
	// own timeout (which ends a call earlier).
	headerTimeout time.Duration
	// rootCAs take --upstream-ca-file: the system roots plus a PEM bundle,
	// for upstreams behind a private CA (an in-cluster model server); nil:
	// the system roots alone.
	rootCAs *x509.CertPool
}

// register adds the egress flags to fs. MODELGATE_ALLOW_PRIVATE_NETWORKS
// adds to the allow-list, which is empty by default.
func (e *egressFlags) register(fs *flag.FlagSet) {
	e.guard, e.headerTimeout = &netguard.Guard{}, upstream.DefaultResponseHeaderTimeout
	if env := os.Getenv("MODELGATE_ALLOW_PRIVATE_NETWORKS"); env != "" {
		if err := e.guard.AllowList(env); err != nil {
			fmt.Fprintln(os.Stderr, "MODELGATE_ALLOW_PRIVATE_NETWORKS:", err)
			os.Exit(2)
		}
	}
	fs.Func("allow-private-networks", "comma-separated CIDRs or addresses that webhook, reference-image and download URLs may reach although not public, e.g. 127.0.0.1/32 for local receivers (env MODELGATE_ALLOW_PRIVATE_NETWORKS); default none",
		e.guard.AllowList)
	fs.Func("upstream-ca-file", "PEM file of CA certificates that upstream certificates may also chain to, besides the system roots (upstreams behind a private CA); verification stays on",
		func(path string) (err error) {
			e.rootCAs, err = rootsWith(path)
			return err
		})
	fs.Func("upstream-response-header-timeout", fmt.Sprintf("longest wait for an upstream's response headers once the request is written, for every upstream call (a non-streamed answer's headers come with its whole body); a backend's timeoutSeconds ends a call earlier; 0 means no bound (default %s)", upstream.DefaultResponseHeaderTimeout),
		func(v string) error {
			d, err := time.ParseDuration(v)
			if err == nil && d < 0 {
				err = errors.New("must not be negative")
			}
			e.headerTimeout = d
			return err
		})
}

// options are the egress fields of wire.SystemOptions.
func (e *egressFlags) options(o wire.SystemOptions) wire.SystemOptions {
	o.Guard, o.UpstreamResponseHeaderTimeout, o.UpstreamRootCAs = e.guard, e.headerTimeout, e.rootCAs
	return o
}

// rootsWith is the system's root pool (an empty one where the system has
// none) with the certificates of a PEM file added; a file without one is
// an error, so a wrong path or format fails at start, not at the first
// upstream call.
func rootsWith(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (c *common) restConfig() (*rest.Config, error) {
	if c.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	}
	return ctrl.GetConfig()
}

// setupLogs installs one logger for controller-runtime and slog: JSON lines
// in production, a console format in development, info level either way.
// connect reads the cluster config and opens the ledger (applying its
// migrations).
func (c *common) connect(ctx context.Context) (*rest.Config, *store.Store, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, nil, err
	}
	ledger, err := store.Open(ctx, c.database)
	if err != nil {
		return nil, nil, err
	}
	return cfg, ledger, nil
}

// runMigrate applies the ledger's migrations and exits: a deployment runs it
// before a new gateway version serves.
func runMigrate(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	setupLogs(c.devLogs)
	ledger, err := store.Open(ctx, c.database)
	if err != nil {
		return err
	}
	ctrl.Log.Info("ledger migrations applied", "dialect", ledger.Dialect())
	return ledger.Close()
}

func setupLogs(dev bool) {
	logger := zap.New(zap.UseDevMode(dev), zap.Level(zapcore.InfoLevel))
	ctrl.SetLogger(logger)
	slog.SetDefault(slog.New(logr.ToSlogHandler(logger)))
	telemetry.RouteStdLog(slog.Default())
	otel.SetLogger(logger.WithName("otel")) // export failures in the process's own log format
}

// startTracing installs tracing when the OTEL_* environment asks for an
// exporter (docs/observability.md), as service modelgate-<cmd> unless
// OTEL_SERVICE_NAME says otherwise; without one it installs nothing. stop
// flushes the spans still batched.
func startTracing(ctx context.Context, cmd string) (stop func(), err error) {
	shutdown, err := telemetry.Setup(ctx, "modelgate-"+cmd, version)
	if err != nil {
		return func() {}, fmt.Errorf("tracing: %w", err)
	}
	if telemetry.Enabled() {
		ctrl.Log.WithName("tracing").Info("exporting traces (OTEL_* environment)")
	}
	return func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(flush); err != nil {
			ctrl.Log.WithName("tracing").Error(err, "flush spans")
		}
	}, nil
}

// managerFlags are the flags of the manager command.
type managerFlags struct {
	metricsAddr string
	probeAddr   string
	leaderElect bool
	syncPeriod  time.Duration
	// mirrorWrites bounds the status writes of the mirrors, per second.
	mirrorWrites float64
	// Private asset review: the per-round deadline (a review that does not
	// decide in time fails the task without a fee) and how long an unused
	// reviewed asset stays reusable (60 days by default).
	reviewDeadline  time.Duration
	batchPoll       time.Duration
	reviewRetention time.Duration
	housekeeping    housekeeping.Keeper
	concurrency     controllers.Concurrency
}

// registerHousekeeping adds the flags of the ledger's housekeeping jobs.
// registerConcurrency adds a --concurrent-<kind>-reconciles flag per
// controller, defaulting to controllers.DefaultConcurrency.
// registerBatchPoll registers how often an upstream batch job is read.
func registerBatchPoll(fs *flag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "batch-poll-interval", batch.DefaultPollInterval,
		"how often the Batch controller reads the state of a batch job running on an upstream's batch API")
}

func registerConcurrency(fs *flag.FlagSet, c *controllers.Concurrency) {
	d := controllers.DefaultConcurrency
	for _, f := range []struct {
		kind string
		v    *int
		def  int
	}{
		{"tenant", &c.Tenant, d.Tenant}, {"apitoken", &c.ApiToken, d.ApiToken}, {"modelroute", &c.ModelRoute, d.ModelRoute},
		{"pricerule", &c.PriceRule, d.PriceRule}, {"generationtask", &c.GenerationTask, d.GenerationTask},
		{"taskwebhook", &c.TaskWebhook, d.TaskWebhook}, {"batch", &c.Batch, d.Batch},
	} {
		fs.IntVar(f.v, "concurrent-"+f.kind+"-reconciles", f.def, "objects of this kind reconciled at once")
	}
}

func registerHousekeeping(fs *flag.FlagSet, k *housekeeping.Keeper) {
	fs.DurationVar(&k.LeaseSweepInterval, "lease-sweep-interval", housekeeping.DefaultLeaseSweepInterval,
		"how often leases of replicas that stopped renewing them are returned to the balances")
	fs.DurationVar(&k.StaleRefundInterval, "stale-refund-interval", housekeeping.DefaultStaleRefundInterval,
		"how often reservations left open by a gateway that died are refunded")
	fs.DurationVar(&k.StaleAge, "stale-reservation-age", housekeeping.DefaultStaleAge,
		"age after which an open text reservation is refunded (generation tasks are exempt until they finish)")
	fs.DurationVar(&k.RetentionInterval, "retention-interval", housekeeping.DefaultRetentionInterval,
		"how often records past their retention are removed")
	k.Retention = housekeeping.DefaultRetention()
	for _, f := range []struct {
		name, usage string
		v           *time.Duration
	}{
		{"retention-usage", "usage rows and their hourly rollups (removed in whole calendar months)", &k.Retention.Usage},
		{"retention-responses", "stored conversations (GET /v1/responses/{id}, previous_response_id)", &k.Retention.Responses},
		{"retention-reservations", "settled and refunded reservations, from when they closed", &k.Retention.Reservations},
		{"retention-tasks", "the archive of finished generation tasks, from when they finished", &k.Retention.Tasks},
	} {
		fs.Var((*days)(f.v), f.name, "how long to keep "+f.usage+", e.g. 400d or 12h; 0 keeps them forever")
	}
}

// days is a duration flag that also takes a whole number of days ("30d"),
// the unit retentions are thought in.
type days time.Duration

func (d *days) String() string {
	if d == nil {
		return "0"
	}
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			return fmt.Errorf("want a whole number of days such as 30d, or a duration such as 12h: %w", err)
		}
		*d = days(time.Duration(v) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	*d = days(v)
	return nil
}

func runManager(ctx context.Context, args []string) error {
	var c common
	var m managerFlags
	fs := flag.NewFlagSet("manager", flag.ExitOnError)
	c.register(fs)
	fs.StringVar(&m.metricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address; 0 disables")
	fs.StringVar(&m.probeAddr, "health-probe-bind-address", ":8081", "health and readiness probe address")
	fs.BoolVar(&m.leaderElect, "leader-elect", true, "elect one active manager among replicas")
	fs.DurationVar(&m.syncPeriod, "status-sync-period", controllers.DefaultBalanceSyncPeriod, "how often ledger figures are mirrored into status")
	fs.Float64Var(&m.mirrorWrites, "status-mirror-writes-per-second", controllers.DefaultMirrorWritesPerSecond,
		"at most this many status writes of mirrored ledger figures per second, across all tokens and tenants")
	fs.DurationVar(&m.reviewDeadline, "review-deadline", generationtask.DefaultReviewDeadline, "private asset review: deadline of one preparation round")
	m.reviewRetention = tasks.DefaultReviewAssetRetention
	fs.Var((*days)(&m.reviewRetention), "retention-reviews", "private asset review: how long an unused reviewed asset (its record and copy) stays reusable, e.g. 60d")
	fs.Var((*days)(&m.reviewRetention), "review-asset-retention", "the same as --retention-reviews")
	registerHousekeeping(fs, &m.housekeeping)
	registerConcurrency(fs, &m.concurrency)
	registerBatchPoll(fs, &m.batchPoll)
	_ = fs.Parse(args)
	setupLogs(c.devLogs)
	stopTracing, err := startTracing(ctx, "manager")
	if err != nil {
		return err
	}
	defer stopTracing()

	cfg, ledger, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer ledger.Close()
	// The GenerationTask controller writes generated media to the gateways'
	// blob store (MODELGATE_BLOB_URL or MODELGATE_BLOB_DIR); it only writes,
	// the gateways sign the links.
	var g gatewayFlags
	sys, err := wire.NewSystem(ctx, c.egress.options(wire.SystemOptions{
		Config: cfg, Ledger: ledger, SystemNamespace: c.systemNamespace,
		MetricsAddr: m.metricsAddr, ProbeAddr: m.probeAddr, LeaderElection: m.leaderElect, PprofAddr: c.pprofAddr,
		Controllers: &controllers.Options{SyncPeriod: m.syncPeriod, MirrorWritesPerSecond: m.mirrorWrites, ReviewDeadline: m.reviewDeadline,
			ReviewAssetRetention: m.reviewRetention, Housekeeping: m.housekeeping, Concurrency: m.concurrency,
			BatchPollInterval: m.batchPoll},
		ManagerBlobs: g.options(""),
	}))
	if err != nil {
		return err
	}
	return sys.Start(ctx)
}

// minLeaseTTL is the shortest --lease-ttl: a replica stops using a lease a
// third of the TTL before it expires, which must cover the second the
// ledger's expiry is rounded down to (and clock skew with the sweeper).
const minLeaseTTL = 3 * time.Second

// gatewayFlags are the flags of the gateway command.
type gatewayFlags struct {
	listen      string
	metricsAddr string
	grace       time.Duration
	defaultRPM  int
	publicURL   string
	balanceUnit string
	cnyPerUSD   decimal.Decimal
	probeImages bool
	uploadTTL   time.Duration
	batchFileMB int64
	submitWait  time.Duration
	leaseTTL    time.Duration
	durability  usagelog.Durability
	consoleOIDC console.OIDC
}

func (g *gatewayFlags) register(fs *flag.FlagSet, defListen string) {
	fs.StringVar(&g.listen, "listen", defListen, "address of the HTTP API")
	fs.DurationVar(&g.grace, "shutdown-grace", 30*time.Second, "time in-flight requests get to finish on shutdown")
	fs.StringVar(&g.publicURL, "public-url", os.Getenv("MODELGATE_PUBLIC_URL"), "the gateway's public base URL for signed file links (env MODELGATE_PUBLIC_URL); default: the listen address")
	fs.StringVar(&g.balanceUnit, "balance-unit", envOr("MODELGATE_BALANCE_UNIT", "usd"), "unit of remain_balance/used_balance: usd, cny or tokens")
	fs.Func("cny-per-usd", "exchange rate for --balance-unit=cny (a decimal, default 7.2)", func(s string) error {
		d, err := decimal.NewFromString(s)
		g.cnyPerUSD = d
		return err
	})
	g.cnyPerUSD = decimal.RequireFromString("7.2")
	fs.IntVar(&g.defaultRPM, "default-requests-per-minute", 0, "per-tenant request limit per minute (across the replicas on one PostgreSQL ledger) for tenants without their own; 0 means none")
	fs.Func("usage-durability", "what a usage row reaches before its response completes: disk (fdatasync, the default; survives power loss) or process (written to the OS, survives a crash of the gateway, not of the machine)",
		func(v string) (err error) { g.durability, err = usagelog.ParseDurability(v); return err })
	fs.DurationVar(&g.uploadTTL, "upload-ttl", handlers.DefaultUploadTTL,
		"how long an upload's signed URL works and the file is kept (a file a live task references is kept until the task ends)")
	fs.Int64Var(&g.batchFileMB, "batch-file-max-mb", files.DefaultMaxBytes>>20,
		"the largest batch input file in MiB (POST /v1/files, POST /v1/messages/batches)")
	fs.DurationVar(&g.submitWait, "submit-wait", handlers.DefaultSubmitWait,
		"how long an image or video submission waits for the upstream to accept or refuse it (a synchronous policy refusal answers 422, nothing charged); 0 answers at once")
	g.leaseTTL = wire.DefaultLeaseTTL
	fs.Func("lease-ttl", fmt.Sprintf("how long a quota lease lives without renewal (default %s, at least %s): an active key renews about every third of it, and the quota of a replica that dies without returning its leases is back this long (plus the manager's --lease-sweep-interval) after its last renewal", wire.DefaultLeaseTTL, minLeaseTTL),
		func(v string) error {
			d, err := time.ParseDuration(v)
			if err == nil && d < minLeaseTTL {
				err = fmt.Errorf("at least %s: a replica stops drawing on a lease a third of its TTL before it expires, and the ledger keeps the expiry in whole seconds", minLeaseTTL)
			}
			g.leaseTTL = d
			return err
		})
	g.registerConsoleOIDC(fs)
	fs.BoolVar(&g.probeImages, "probe-reference-images", true, "download reference images of the multi-image family to check format, size and aspect (turn off without egress)")
}

// registerConsoleOIDC adds the flags of the console's OpenID Connect
// sign-in (docs/console.md); without --console-oidc-issuer it is off.
func (g *gatewayFlags) registerConsoleOIDC(fs *flag.FlagSet) {
	o := &g.consoleOIDC
	fs.StringVar(&o.Issuer, "console-oidc-issuer", "", "issuer URL of the OpenID Connect provider the tenant console signs in with; empty: access-token sign-in only")
	fs.StringVar(&o.ClientID, "console-oidc-client-id", "", "the console's client ID at the OpenID Connect provider")
	fs.Func("console-oidc-client-secret-file", "file holding the console's client secret at the OpenID Connect provider (read at start; none: a public client, PKCE only)",
		func(path string) error {
			b, err := os.ReadFile(path)
			if err == nil && strings.TrimSpace(string(b)) == "" {
				err = fmt.Errorf("%s is empty", path)
			}
			o.ClientSecret = strings.TrimSpace(string(b))
			return err
		})
	fs.StringVar(&o.RedirectURL, "console-oidc-redirect-url", "", "the console's callback URL registered at the provider; default: the request's scheme and host + "+console.CallbackPath)
	fs.StringVar(&o.GroupsClaim, "console-oidc-groups-claim", console.DefaultGroupsClaim, "ID token claim holding the user's groups, matched against Tenant spec.console.oidc")
	fs.StringVar(&o.PlatformAdminGroup, "console-platform-admin-group", "", "group whose members sign in as platform admins (no tenant; "+console.PlatformPath+"); empty: none")
}

// options are the gateway's options; NewSystem sets the system namespace.
func (g *gatewayFlags) options(dataDir string) wire.Options {
	return wire.Options{Listen: g.listen, ShutdownGrace: g.grace,
		DataDir: dataDir, ReplicaID: os.Getenv("POD_NAME"), DefaultRequestsPerMinute: int32(g.defaultRPM),
		PublicURL: g.publicURL, BlobDir: os.Getenv("MODELGATE_BLOB_DIR"),
		BlobSigningKey:    []byte(os.Getenv("MODELGATE_BLOB_SIGNING_KEY")),
		ConsoleSessionKey: []byte(os.Getenv("MODELGATE_CONSOLE_SESSION_KEY")),
		BlobURL:           os.Getenv("MODELGATE_BLOB_URL"), BlobPublicURL: os.Getenv("MODELGATE_BLOB_PUBLIC_URL"),
		BalanceUnit: handlers.BalanceUnit{Unit: g.balanceUnit, CNYPerUSD: g.cnyPerUSD}, NoImageProbe: !g.probeImages,
		UploadTTL: g.uploadTTL, BatchFileMaxBytes: g.batchFileMB << 20, SubmitWait: submitWaitOption(g.submitWait),
		LeaseTTL: g.leaseTTL, UsageDurability: g.durability, ConsoleOIDC: g.consoleOIDC}
}

func runGateway(ctx context.Context, args []string) error {
	var c common
	var g gatewayFlags
	fs := flag.NewFlagSet("gateway", flag.ExitOnError)
	c.register(fs)
	g.register(fs, ":8080")
	fs.StringVar(&g.metricsAddr, "metrics-bind-address", ":9090", "metrics endpoint address; 0 disables")
	_ = fs.Parse(args)
	setupLogs(c.devLogs)
	stopTracing, err := startTracing(ctx, "gateway")
	if err != nil {
		return err
	}
	defer stopTracing()

	cfg, ledger, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer ledger.Close()
	// The gateway is a manager without controllers or leader election: it
	// gets the shared informer cache, its indexes and the metrics endpoint.
	opts := g.options(envOr("MODELGATE_SPOOL_DIR", os.TempDir()))
	sys, err := wire.NewSystem(ctx, c.egress.options(wire.SystemOptions{
		Config: cfg, Ledger: ledger, SystemNamespace: c.systemNamespace,
		MetricsAddr: g.metricsAddr, Gateway: &opts, PprofAddr: c.pprofAddr,
	}))
	if err != nil {
		return err
	}
	return sys.Start(ctx)
}

// newestAssetsDir finds bin/k8s/<version> (the newest) for the dev command.
func newestAssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	dirs, _ := filepath.Glob(filepath.Join("bin", "k8s", "*"))
	sort.Strings(dirs)
	if len(dirs) == 0 {
		return filepath.Join("bin", "k8s")
	}
	return dirs[len(dirs)-1]
}

// devFlags are the flags of the dev command.
type devFlags struct {
	dataDir    string
	assetsDir  string
	crdDir     string
	samplesDir string
	database   string
	housekeep  housekeeping.Keeper
	batchPoll  time.Duration
	pprofAddr  string
	egress     egressFlags
}

// runDev starts the embedded system: local control plane, SQLite ledger,
// samples, and manager plus gateway in this process, until ctx is done.
func runDev(ctx context.Context, args []string) error {
	var d devFlags
	var g gatewayFlags
	fs := flag.NewFlagSet("dev", flag.ExitOnError)
	g.register(fs, "127.0.0.1:8080")
	fs.StringVar(&d.dataDir, "data-dir", ".modelgate", "directory for etcd data, the SQLite ledger, the kubeconfig and dev.json; reused by the next run")
	fs.StringVar(&d.assetsDir, "assets-dir", newestAssetsDir(), "directory with kube-apiserver and etcd (hack/tools.sh envtest)")
	fs.StringVar(&d.crdDir, "crd-dir", filepath.Join("config", "crd", "bases"), "CRD manifests to install")
	fs.StringVar(&d.samplesDir, "samples-dir", filepath.Join("config", "samples"), "manifests applied at start")
	sysNS := fs.String("system-namespace", "modelgate-system", "namespace of platform-wide routes and prices")
	fs.StringVar(&d.database, "database", "", "ledger DSN, e.g. postgres://user@localhost/modelgate for a PostgreSQL you already run; default: SQLite in the data directory")
	registerHousekeeping(fs, &d.housekeep)
	registerBatchPoll(fs, &d.batchPoll)
	d.egress.register(fs)
	registerPprof(fs, &d.pprofAddr)
	_ = fs.Parse(args)
	setupLogs(true)
	log := ctrl.Log.WithName("dev")
	stopTracing, err := startTracing(ctx, "dev")
	if err != nil {
		return err
	}
	defer stopTracing()

	if err := os.MkdirAll(d.dataDir, 0o700); err != nil {
		return err
	}
	dataDir, err := filepath.Abs(d.dataDir)
	if err != nil {
		return err
	}
	log.Info("starting the local control plane (etcd + kube-apiserver)", "assets", d.assetsDir)
	cp, err := devenv.Start(devenv.Options{AssetsDir: d.assetsDir, DataDir: dataDir, CRDDir: d.crdDir})
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			log.Error(err, "stop control plane")
		}
	}()
	dsn := d.database
	if dsn == "" {
		dsn = "sqlite://" + filepath.Join(dataDir, "ledger.db")
	}
	ledger, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer ledger.Close()

	// One process, one manager: the controllers write generated media to
	// the blob store the gateway serves and signs.
	opts := g.options(dataDir)
	sys, err := wire.NewSystem(ctx, d.egress.options(wire.SystemOptions{
		Config: cp.Config, Ledger: ledger, SystemNamespace: *sysNS,
		Controllers: &controllers.Options{SyncPeriod: 10 * time.Second, Housekeeping: d.housekeep, BatchPollInterval: d.batchPoll},
		Gateway:     &opts, PprofAddr: d.pprofAddr,
	}))
	if err != nil {
		return err
	}
	gw := sys.Gateway
	kc, err := client.New(cp.Config, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		return err
	}
	if err := devenv.EnsureNamespace(ctx, kc, *sysNS); err != nil {
		return err
	}
	objs, err := devenv.ApplyDir(ctx, kc, d.samplesDir)
	if err != nil {
		return err
	}
	log.Info("applied samples", "objects", len(objs), "dir", d.samplesDir)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- sys.Start(runCtx) }()

	info, err := devenv.WaitForDemo(ctx, kc, objs)
	if err == nil {
		err = waitForPublishedPrices(ctx, kc, objs)
	}
	if err != nil {
		stop()
		return errors.Join(err, <-done)
	}
	for gw.Addr() == "" && ctx.Err() == nil { // the server binds when the manager starts it
		time.Sleep(20 * time.Millisecond)
	}
	info.GatewayURL = "http://" + gw.Addr()
	info.Kubeconfig = cp.KubeconfigPath
	info.Database = redactDSN(dsn) // printed in the banner: never a password
	info.SystemNamespace = *sysNS
	if err := devenv.WriteInfo(filepath.Join(dataDir, "dev.json"), info); err != nil {
		stop()
		return errors.Join(err, <-done)
	}
	fmt.Print(devenv.Banner(info, filepath.Join(dataDir, "dev.json")))
	err = <-done
	log.Info("stopped; etcd data and the ledger stay in " + dataDir)
	return err
}

// devSignals is the signal handling of `modelgate dev`: the first SIGINT or
// SIGTERM starts a clean shutdown; a second one stops etcd and
// kube-apiserver at once and exits. (controller-runtime's handler exits on
// the second signal too, but leaves those two running: envtest starts them
// in process groups of their own, which a terminal's Ctrl-C does not reach.)
func devSignals() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		fmt.Fprintln(os.Stderr, "modelgate dev: second signal: stopping etcd and kube-apiserver now")
		devenv.StopChildren(5 * time.Second)
		os.Exit(1)
	}()
	return ctx
}

// redactDSN hides the password of a URL-shaped DSN.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}

// submitWaitOption maps --submit-wait 0 (answer at once) to the option's
// "no wait", since a zero option means the default.
func submitWaitOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// waitForPublishedPrices waits until the PriceRule controller has published
// every sample PriceRule: the demo key can be Ready before the rules its
// models are priced by, and a gateway answers an unpriced model 404, so
// dev.json (which scripts and tests take as "ready") waits for both.
func waitForPublishedPrices(ctx context.Context, c client.Client, applied []*unstructured.Unstructured) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, o := range applied {
			if o.GetKind() != "PriceRule" {
				continue
			}
			pr := &v1.PriceRule{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), pr); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if !pricing.IsPublished(pr) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the sample price rules to be published: %w", err)
	}
	return nil
}
