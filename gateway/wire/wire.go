// Package wire assembles the gateway from a controller-runtime manager (its
// informer cache and client) and a ledger: authenticator, router, price
// table, quota leases, usage writer, handlers and server. main and the test
// suites build the gateway the same way through it.
package wire

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/admission"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/billing"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/http/console"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/http/server"
	"github.com/modelgate/modelgate/gateway/index"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/metrics"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/platform/periodic"
	"github.com/modelgate/modelgate/gateway/pricing"
	"github.com/modelgate/modelgate/gateway/ratelimit"
	"github.com/modelgate/modelgate/gateway/routing"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/tokenspec"
	"github.com/modelgate/modelgate/gateway/uploads"
	"github.com/modelgate/modelgate/gateway/upstream"
	"github.com/modelgate/modelgate/gateway/upstream/credential"
	"github.com/modelgate/modelgate/gateway/usagelog"
)

// Options configure the gateway.
type Options struct {
	Listen        string
	ShutdownGrace time.Duration
	Clock         clock.PassiveClock
	// SystemNamespace holds platform routes and prices.
	SystemNamespace string
	// DataDir holds the usage spool (rows written while the database is down).
	DataDir string
	// ReplicaID names this replica's quota leases; default: hostname + pid.
	ReplicaID string
	// DefaultRequestsPerMinute limits tenants without their own limit; 0: none.
	DefaultRequestsPerMinute int32
	// BlobDir is the local blob store (uploads, generated assets); default DataDir/blobs.
	BlobDir string
	// BlobSigningKey signs local blob URLs; the same on every replica.
	BlobSigningKey []byte
	// ConsoleSessionKey signs the tenant console's session cookies; the same
	// on every replica. Empty: derived from BlobSigningKey; with neither, a
	// random key per process (sessions then end when the process restarts
	// and do not carry across replicas).
	ConsoleSessionKey []byte
	// NoConsole turns the tenant console (/console/) off.
	NoConsole bool
	// ConsoleOIDC configures the console's sign-in with an OpenID Connect
	// provider (--console-oidc-*); zero: access-token sign-in only.
	ConsoleOIDC console.OIDC
	// Blobs is an open store to use (dev shares one with the controllers);
	// nil opens one from the Blob* options.
	Blobs *blob.Store
	// BlobURL selects a cloud store instead (s3://, gs://, azblob://).
	BlobURL string
	// BlobPublicURL, with BlobURL, makes object URLs BlobPublicURL/key
	// instead of the bucket's signed URLs.
	BlobPublicURL string
	// PublicURL is the gateway's public base URL for signed links; default
	// the address it listens on.
	PublicURL string
	// BalanceUnit is the display unit of remain_balance and used_balance.
	BalanceUnit handlers.BalanceUnit
	// UsageDurability is what a usage row reaches before its response
	// completes (usagelog.DurableDisk by default).
	UsageDurability usagelog.Durability
	// UploadTTL is how long uploads (and their signed URLs) live; default 7 days.
	UploadTTL time.Duration
	// BatchFileMaxBytes is the largest batch input file (POST /v1/files,
	// POST /v1/messages/batches); default files.DefaultMaxBytes (200 MB).
	BatchFileMaxBytes int64
	// SubmitWait bounds how long a media submission waits for the first
	// upstream submission's outcome; 0: handlers.DefaultSubmitWait, negative: none.
	SubmitWait time.Duration
	// LeaseTTL is how long a quota lease lives without renewal: a replica
	// that dies without returning its leases holds their quota this long
	// (plus the manager's sweep interval). Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// WrapUsageSink, when set, wraps the usage writer as the handlers see
	// it; tests hold acknowledgements with it.
	WrapUsageSink func(handlers.UsageSink) handlers.UsageSink
	// NoImageProbe turns off downloading reference images to check their
	// format, size and aspect (multi-image family); for clusters without
	// egress, and for tests whose image URLs do not exist.
	NoImageProbe bool

	// lines, when set, is bound to this gateway's text pipeline: the Batch
	// controller of the same system runs its lines on it.
	lines *batchLines
}

// DefaultLeaseTTL is the gateway's lease TTL (--lease-ttl): an active key
// renews its lease about every 3 minutes, and a dead replica's lease
// returns within 10 minutes plus the sweep interval.
const DefaultLeaseTTL = 10 * time.Minute

// Gateway builds the gateway server and adds it to the manager, which runs
// it on every replica (it needs no leader). The server is ready when the
// informer caches have synced and the ledger answers.
func Gateway(mgr ctrl.Manager, ledger *store.Store, upstreams *upstream.Registry, guard *netguard.Guard, o Options) (*server.Server, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = "modelgate-system"
	}
	pl, err := newPipeline(mgr, ledger, upstreams, o)
	if err != nil {
		return nil, err
	}
	o.ReplicaID = pl.replicaID
	usage, leaser, spoolPath := pl.usage, pl.leaser, pl.spoolPath
	authn, router, prices := pl.authn, pl.router, pl.prices
	var lines *batchLines // drained by this gateway before its pipeline closes
	if o.lines != nil && o.lines.bind(handlers.NewBatchLines(pl.text, pl.embeddings), authn) {
		lines = o.lines
	}
	var srv *server.Server
	blobs := o.Blobs
	if blobs == nil {
		if blobs, err = OpenBlobs(o, func() string { return publicURL(o, srv) }); err != nil {
			return nil, err
		}
	}
	srv = server.New(server.Options{
		Addr:          o.Listen,
		ShutdownGrace: o.ShutdownGrace,
		Unmatched:     handlers.Unmatched,
		ReadyChecks: map[string]server.ReadyCheck{
			"informer caches": func(ctx context.Context) error {
				if !mgr.GetCache().WaitForCacheSync(ctx) {
					return errors.New("not synced yet")
				}
				return nil
			},
			"ledger": ledgerOrSpool(ledger, spoolPath),
		},
	})
	breaker, admitter, creds := pl.breaker, pl.admitter, pl.creds
	batchFiles := files.New(ledger, blobs, files.Options{MaxBytes: o.BatchFileMaxBytes, Clock: o.Clock})
	pricingHandler := &handlers.Pricing{Cache: mgr.GetCache(), SystemNamespace: o.SystemNamespace}
	handlers.Register(srv, handlers.Handlers{
		Auth:      authn,
		Tokens:    &handlers.Tokens{Writer: mgr.GetClient(), Ledger: ledger, Auth: authn, Clock: o.Clock},
		Balance:   &handlers.Balance{Ledger: ledger, Unit: o.BalanceUnit},
		Models:    &handlers.Models{Router: router, Prices: prices.Table},
		Pricing:   pricingHandler,
		Usage:     &handlers.Usage{Ledger: ledger, Auth: authn, Clock: o.Clock},
		Responses: &handlers.StoredResponses{Ledger: ledger},
		Uploads:   &handlers.Uploads{Blobs: blobs, Ledger: ledger, Clock: o.Clock, UploadTTL: o.UploadTTL},
		Text:      pl.text,
		CountTokens: &handlers.CountTokensDeps{Clock: o.Clock, Admitter: admitter, Breaker: breaker,
			Upstreams: upstreams, Credentials: creds},
		Embeddings: pl.embeddings,
		Media: &handlers.MediaDeps{Cache: mgr.GetCache(), Writer: mgr.GetClient(), API: mgr.GetAPIReader(),
			Ledger: ledger, Clock: o.Clock, Router: router, Admitter: admitter, Blobs: blobs,
			SubmitWait: o.SubmitWait, ImageProbe: imageProbe(blobs, guard, o.NoImageProbe)},
		Files: &handlers.Files{Files: batchFiles},
		Batches: &handlers.Batches{Files: batchFiles, Writer: mgr.GetClient(), API: mgr.GetAPIReader(),
			Routes: router, Clock: o.Clock},
	})
	if !o.NoConsole {
		key, err := ConsoleSessionKey(o)
		if err != nil {
			return nil, err
		}
		if err := o.ConsoleOIDC.Validate(); err != nil {
			return nil, err
		}
		console.Register(srv, console.Deps{Accounts: authn, Ledger: ledger, Cache: mgr.GetCache(),
			Catalog: pricingHandler.TenantCatalog, Results: blobs, Clock: o.Clock, SessionKey: key,
			Writer: mgr.GetClient(), Registry: ledger, KnowsKey: authn.KnowsKey, Live: mgr.GetAPIReader(),
			OIDC: o.ConsoleOIDC, Unmatched: handlers.Unmatched})
	}
	if blobs.Local() {
		srv.Handle("GET "+blob.FilesPath, blobs.Handler())
	}
	if err := mgr.Add(&runnable{srv: srv, usage: usage, leaser: leaser, lines: lines}); err != nil {
		return nil, err
	}
	// Expired uploads and their blobs are deleted on every replica, except
	// those a live task still references.
	sweeper := uploads.NewSweeper(ledger, blobs, o.Clock)
	sweeper.InUse = referencedByLiveTask(mgr.GetCache())
	if err := mgr.Add(sweeper); err != nil {
		return nil, err
	}
	// Expired batch files go the same way, on every replica (deletes are
	// idempotent).
	if err := mgr.Add(fileSweeper{files: batchFiles, clock: periodic.Ticking(o.Clock)}); err != nil {
		return nil, err
	}
	return srv, nil
}

// pipeline is the text data path of a gateway: usage writer and spool,
// quota leaser, authenticator, router, limits, admission, prices and
// credentials, and the text and embeddings handlers' dependencies on them.
// A gateway serves its endpoints on it; the Batch controller of a manager
// without a gateway runs its lines on one of its own (batchLines).
type pipeline struct {
	replicaID, spoolPath string
	usage                *usagelog.Writer
	leaser               *store.Leaser
	authn                *auth.Authenticator
	breaker              *routing.Breaker
	router               *routing.Router
	lim                  *ratelimit.Limiter
	admitter             *admission.Admitter
	sink                 handlers.UsageSink
	creds                credential.Source
	prices               *priceBook
	text                 *handlers.TextDeps
	embeddings           *handlers.EmbeddingsDeps
}

// newPipeline builds the text data path on the manager's cache and the
// ledger (o's clock and system namespace already defaulted).
func newPipeline(mgr ctrl.Manager, ledger *store.Store, upstreams *upstream.Registry, o Options) (*pipeline, error) {
	// The spool is named after the replica's stable name (POD_NAME), or
	// "local" without one, so that the next run on the same data directory
	// replays what a killed run left in it; a lock keeps two live processes
	// off one spool. Holding the lock, the gateway returns the leases an
	// earlier run under the same name left (ReturnReplicaLeases).
	// Without a data directory the spool goes to the temp directory under
	// the process's own name, as before.
	spoolID := o.ReplicaID
	if spoolID == "" {
		spoolID = "local"
	}
	if o.ReplicaID == "" {
		host, _ := os.Hostname()
		o.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if o.DataDir == "" { // no data directory of its own: nothing to take over
		o.DataDir, spoolID = os.TempDir(), o.ReplicaID
	}
	spoolPath := filepath.Join(o.DataDir, "usage-"+spoolID+".spool")
	if err := lockSpool(spoolPath); err != nil {
		return nil, err
	}
	usage, err := usagelog.New(ledger, usagelog.Config{SpoolPath: spoolPath, Durability: o.UsageDurability})
	if err != nil {
		return nil, fmt.Errorf("usage writer: %w", err)
	}
	metrics.RegisterUsageWriter(usage)
	// Accounts with less than two chunks (2 USD) left reserve directly, so
	// no quota strands in one replica's lease near the end of a balance.
	// A lease is renewed about every TTL/3 per active key (not on every
	// request), and a dead replica's lease returns one TTL (plus the sweep
	// interval) after its last renewal.
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if returned, err := ledger.ReturnReplicaLeases(context.Background(), o.ReplicaID); err != nil {
		return nil, fmt.Errorf("return the leases of an earlier run of %s: %w", o.ReplicaID, err)
	} else if returned > 0 {
		slog.Info("returned the leases an earlier run of this replica left", "replica", o.ReplicaID, "quota", int64(returned))
	}
	leaser := ledger.NewLeaser(store.LeaseConfig{ReplicaID: o.ReplicaID, Chunk: billing.QuotaPerUSD,
		DirectBelow: 2 * billing.QuotaPerUSD, TTL: o.LeaseTTL})
	lookup, err := index.NewLookup(context.Background(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	routes, err := routing.NewRouteIndex(context.Background(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	secrets, err := watchSecrets(context.Background(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	prices := &priceBook{cache: mgr.GetCache(), system: o.SystemNamespace}
	if err := prices.watch(context.Background(), mgr.GetCache()); err != nil {
		return nil, err
	}
	authn := &auth.Authenticator{Lookup: lookup, Clock: o.Clock, ResolveTokenID: resolveTokenID(ledger)}
	// One breaker: the router skips the backends whose circuit the text
	// handler opened.
	breaker := routing.NewBreaker(o.Clock)
	router := &routing.Router{Cache: mgr.GetCache(), SystemNamespace: o.SystemNamespace, Index: routes, Breaker: breaker}
	lim := limiter(ledger, o)
	// One Admitter for every admitted endpoint: routes, limits and prices
	// (looked up once more in a rebuilt table when a fresh price is missing).
	admitter := &admission.Admitter{Routes: router, Limits: lim, Clock: o.Clock,
		Prices: handlers.PriceSelector{Prices: prices.Table, Recheck: prices.Recheck}.Select}
	sink := usageSink(usage, o.WrapUsageSink)
	creds := credentials(secrets, mgr.GetClient())
	return &pipeline{replicaID: o.ReplicaID, spoolPath: spoolPath, usage: usage, leaser: leaser, authn: authn,
		breaker: breaker, router: router, lim: lim, admitter: admitter, sink: sink, creds: creds, prices: prices,
		text: &handlers.TextDeps{Clock: o.Clock, Admitter: admitter, Breaker: breaker, Limiter: lim, Leaser: leaser,
			UsageLog: sink, Prices: prices.Table, Upstreams: upstreams, Credentials: creds, Ledger: ledger},
		embeddings: &handlers.EmbeddingsDeps{Clock: o.Clock, Admitter: admitter, Breaker: breaker, Limiter: lim, Leaser: leaser,
			UsageLog: sink, Prices: prices.Table, Upstreams: upstreams, Credentials: creds},
	}, nil
}

// limiter holds the rate limits of every replica on a PostgreSQL ledger
// between them (shares of minute windows in the ledger); a SQLite ledger has
// one gateway, whose in-memory buckets are exact.
func limiter(ledger *store.Store, o Options) *ratelimit.Limiter {
	l := &ratelimit.Limiter{Clock: o.Clock, DefaultPerMinute: o.DefaultRequestsPerMinute}
	if ledger.Dialect() == "postgres" {
		l.Windows = ledger
	}
	return l
}

// ledgerOrSpool is ready when the ledger answers or, while it does not, when
// the usage spool can take rows: a database outage then spools usage instead
// of taking every replica out of rotation. (Requests that need the database
// itself, such as a lease refill, still fail and say so.)
func ledgerOrSpool(ledger *store.Store, spoolPath string) server.ReadyCheck {
	return func(ctx context.Context) error {
		err := ledger.Ping(ctx)
		if err == nil {
			return nil
		}
		f, ferr := os.OpenFile(filepath.Join(filepath.Dir(spoolPath), ".ready-probe"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if ferr != nil {
			return fmt.Errorf("ledger unreachable (%v) and usage spool not writable (%v)", err, ferr)
		}
		return f.Close()
	}
}

// publicURL is the configured public base URL, else the listen address.
func publicURL(o Options, srv *server.Server) string {
	if o.PublicURL != "" {
		return o.PublicURL
	}
	return "http://" + srv.Addr()
}

// OpenBlobs opens the cloud store named by BlobURL, or else the local blob
// store in BlobDir (default DataDir/blobs); with neither a URL nor a
// directory it returns nil. base is the public base URL of local links. Without a configured signing key a
// random one is made: links then stop working when the process restarts,
// which is acceptable for dev and tests but not for several replicas.
func OpenBlobs(o Options, base func() string) (*blob.Store, error) {
	if o.BlobURL != "" {
		return blob.OpenURL(context.Background(), o.BlobURL, o.BlobPublicURL)
	}
	dir := o.BlobDir
	if dir == "" && o.DataDir != "" {
		dir = filepath.Join(o.DataDir, "blobs")
	}
	if dir == "" {
		return nil, nil
	}
	key := o.BlobSigningKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	return blob.OpenLocal(blob.Config{Dir: dir, SigningKey: key, BaseURL: base})
}

// ConsoleSessionKey is the key of the console's session cookies: the
// configured one, else one derived from the blob signing key (so a
// deployment that shares that key across replicas shares sessions too),
// else a random one.
func ConsoleSessionKey(o Options) ([]byte, error) {
	if len(o.ConsoleSessionKey) > 0 {
		return o.ConsoleSessionKey, nil
	}
	if len(o.BlobSigningKey) > 0 {
		m := hmac.New(sha256.New, o.BlobSigningKey)
		m.Write([]byte("modelgate console session key v1"))
		return m.Sum(nil), nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, nil
}

// resolveTokenID registers (idempotently, by UID) a token whose status has no
// ID yet. The registration is tokenspec.For's, as the controller's is, so
// the row starts with the spec's quota or credits whether the gateway or the
// controller registers first, and the controller's registration returns the
// same ID.
func resolveTokenID(ledger *store.Store) auth.TokenIDResolver {
	return func(ctx context.Context, tok *v1.ApiToken, userID int64) (int64, error) {
		spec, err := tokenspec.For(tok, userID)
		if err != nil {
			return 0, err
		}
		return ledger.EnsureToken(ctx, spec)
	}
}

// priceBook keeps the compiled price table, rebuilt lazily after any
// PriceRule change the informer reports, so the hot path only loads a pointer.
type priceBook struct {
	cache  client.Reader
	system string
	table  atomic.Pointer[pricing.Table]
	dirty  atomic.Bool
	// rebuild serialises rebuilds: without it a rebuild that listed the
	// cache earlier could store its older table after a later one, and the
	// stale table would stay until the next PriceRule event.
	rebuild sync.Mutex
	// rechecked is when Recheck last forced a rebuild (Unix nanoseconds).
	rechecked atomic.Int64
}

// Table returns the current table, rebuilding it when rules changed.
func (b *priceBook) Table() *pricing.Table {
	if t := b.table.Load(); t != nil && !b.dirty.Load() {
		return t
	}
	b.rebuild.Lock()
	defer b.rebuild.Unlock()
	if b.dirty.Swap(false) || b.table.Load() == nil {
		list := &v1.PriceRuleList{}
		if err := b.cache.List(context.Background(), list); err != nil {
			b.dirty.Store(true)
			slog.Error("list price rules", "error", err)
		}
		b.table.Store(pricing.NewTable(b.system, list.Items))
	}
	return b.table.Load()
}

// recheckEvery bounds forced rebuilds: a client asking for an unpriced
// model in a loop costs at most one list and compile per interval.
const recheckEvery = 100 * time.Millisecond

// Recheck rebuilds the table from the cache now, at most once per
// recheckEvery, and returns the current table. The informer updates its
// cache before it delivers the event that marks the table dirty, and under
// load that delivery can trail by a while: a price just published may be in
// the cache and not yet in the table.
func (b *priceBook) Recheck() *pricing.Table {
	now := time.Now().UnixNano()
	if last := b.rechecked.Load(); now-last >= int64(recheckEvery) && b.rechecked.CompareAndSwap(last, now) {
		b.dirty.Store(true)
	}
	return b.Table()
}

// watch marks the table dirty on every PriceRule event.
func (b *priceBook) watch(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &v1.PriceRule{})
	if err != nil {
		return fmt.Errorf("price rule informer: %w", err)
	}
	mark := func(any) { b.dirty.Store(true) }
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: mark, DeleteFunc: mark, UpdateFunc: func(_, o any) { mark(o) },
	})
	return err
}

// runnable runs the server on every replica, leader or not, and after the
// server has drained flushes the usage writer and returns unused leases.
type runnable struct {
	srv    *server.Server
	usage  *usagelog.Writer
	leaser *store.Leaser
	// lines are the batch lines run on this gateway's pipeline (nil: none).
	lines *batchLines
}

func (r *runnable) NeedLeaderElection() bool { return false }

// Start is called by the manager once its cache is started.
func (r *runnable) Start(ctx context.Context) error {
	err := r.srv.Run(ctx)
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.lines != nil {
		r.lines.drain(shutdown)
	}
	if cerr := r.usage.Close(shutdown); cerr != nil {
		err = errors.Join(err, fmt.Errorf("flush usage rows: %w", cerr))
	}
	if cerr := r.leaser.Close(shutdown); cerr != nil {
		err = errors.Join(err, fmt.Errorf("return quota leases: %w", cerr))
	}
	return err
}

var _ manager.LeaderElectionRunnable = (*runnable)(nil)

// referencedByLiveTask asks the informer cache whether an unfinished
// GenerationTask's request names the upload.
func referencedByLiveTask(c client.Reader) uploads.InUse {
	return func(ctx context.Context, u store.Upload) (bool, error) {
		var list v1.GenerationTaskList
		if err := c.List(ctx, &list, client.MatchingFields{index.TaskUploadRefs: u.ID}); err != nil {
			return false, fmt.Errorf("tasks referencing upload %s: %w", u.ID, err)
		}
		return len(list.Items) > 0, nil
	}
}

// writerSink is the usage writer as the handlers' UsageSink.
type writerSink struct{ w *usagelog.Writer }

func (s writerSink) Submit(ctx context.Context, row store.UsageRow) (handlers.Durable, error) {
	ack, err := s.w.Submit(ctx, row)
	if err != nil {
		return nil, err
	}
	return ack, nil
}

func usageSink(w *usagelog.Writer, wrap func(handlers.UsageSink) handlers.UsageSink) handlers.UsageSink {
	var s handlers.UsageSink = writerSink{w}
	if wrap != nil {
		s = wrap(s)
	}
	return s
}

// fileSweeper deletes expired batch files and their blobs every ten
// minutes; a controller-runtime Runnable that needs no leader.
type fileSweeper struct {
	files *files.Store
	clock clock.WithTicker
}

func (s fileSweeper) Start(ctx context.Context) error {
	periodic.Run(ctx, s.clock, 10*time.Minute, func(ctx context.Context) {
		if n, err := s.files.Sweep(ctx, 0); err != nil {
			slog.Error("sweep expired batch files", "deleted", n, "error", err)
		}
	})
	return nil
}

func (fileSweeper) NeedLeaderElection() bool { return false }
