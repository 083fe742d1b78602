package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controllers/batch"
	"github.com/modelgate/modelgate/gateway/auth"
	"github.com/modelgate/modelgate/gateway/files"
	"github.com/modelgate/modelgate/gateway/http/handlers"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
)

// batchLines is the Batch controller's LineRunner: the text handlers of a
// pipeline in process, the line sent as the batch's ApiToken (raw keys are
// not stored, so the token is authenticated by name, with the checks a key
// gets: usable now, tenant ready). It is bound to the first gateway of
// the system, or to a pipeline of its own in a manager without one.
type batchLines struct {
	cache client.Reader
	bound atomic.Pointer[boundLines]
	// The pipeline's usage writer and leases are closed only after the
	// lines running on it have settled (drain); a line asked for once the
	// drain began is not run (the controller runs it after the restart).
	mu       sync.Mutex
	draining bool
	running  sync.WaitGroup
}

type boundLines struct {
	lines *handlers.BatchLines
	authn *auth.Authenticator
}

// bind binds l to a pipeline's handlers unless it is bound already, and
// reports whether it bound them: that pipeline then drains l before it
// closes.
func (l *batchLines) bind(lines *handlers.BatchLines, authn *auth.Authenticator) bool {
	return l.bound.CompareAndSwap(nil, &boundLines{lines: lines, authn: authn})
}

// drain stops new lines and waits until the running ones are done (or ctx
// ends).
func (l *batchLines) drain(ctx context.Context) {
	l.mu.Lock()
	l.draining = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() { l.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (l *batchLines) begin() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		return false
	}
	l.running.Add(1)
	return true
}

var (
	errNoPipeline = errors.New("batch lines: no text pipeline in this process yet")
	errDraining   = errors.New("batch lines: the text pipeline is shutting down")
)

// Run is batch.LineRunner.
func (l *batchLines) Run(ctx context.Context, b *v1.Batch, requestID string, body []byte) (batch.LineResult, error) {
	bl := l.bound.Load()
	if bl == nil {
		return batch.LineResult{}, errNoPipeline
	}
	if !l.begin() {
		return batch.LineResult{}, errDraining
	}
	defer l.running.Done()
	p, refused, err := l.principal(ctx, bl, b)
	if err != nil || refused != nil {
		return deref(refused), err
	}
	return lineResult(bl.lines.Serve(ctx, b.Spec.Endpoint, p, requestID, body)), nil
}

// principal authenticates the batch's ApiToken by name, with the checks a
// key gets (usable now, tenant ready); refused is the answer of a line
// sent by a key that is not.
func (l *batchLines) principal(ctx context.Context, bl *boundLines, b *v1.Batch) (*auth.Principal, *batch.LineResult, error) {
	tok := &v1.ApiToken{}
	err := l.cache.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.TokenName}, tok)
	switch {
	case apierrors.IsNotFound(err), err == nil && tok.Status.TokenID != 0 && tok.Status.TokenID != b.Spec.TokenID:
		res := lineResult(bl.lines.Refuse(b.Spec.Endpoint, http.StatusUnauthorized, "the API key that submitted this batch no longer exists"))
		return nil, &res, nil
	case err != nil:
		return nil, nil, fmt.Errorf("read the batch's ApiToken: %w", err)
	}
	p, f := bl.authn.Principal(ctx, tok)
	if f != nil {
		res := lineResult(bl.lines.Refuse(b.Spec.Endpoint, f.Status, f.Message))
		return nil, &res, nil
	}
	return p, nil, nil
}

func deref(r *batch.LineResult) batch.LineResult {
	if r == nil {
		return batch.LineResult{}
	}
	return *r
}

func lineResult(r handlers.LineResult) batch.LineResult {
	return batch.LineResult{Status: r.Status, Body: r.Body, Billed: r.Billed, Quota: r.Quota, Tokens: r.Tokens}
}

// batchFilesOf is the controller's Files on the gateway's file store (nil
// without a blob store: no Batch controller runs then).
func batchFilesOf(ledger *store.Store, blobs *blob.Store) batch.Files {
	if blobs == nil {
		return nil
	}
	return batchFiles{files.New(ledger, blobs, files.Options{})}
}

// batchFiles is the file store as the controller's Files.
type batchFiles struct{ s *files.Store }

func (f batchFiles) Open(ctx context.Context, userID int64, id string) (io.ReadCloser, error) {
	_, rd, err := f.s.Open(ctx, userID, id)
	if errors.Is(err, files.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", batch.ErrFileNotFound, err)
	}
	return rd, err
}

func (f batchFiles) WriteResult(ctx context.Context, userID int64, name string, expiresAfter time.Duration, r io.Reader) (string, error) {
	file, err := f.s.WriteResult(ctx, userID, files.PurposeBatchOutput, name, expiresAfter, r)
	return file.ID, err
}

// addBatchPipeline gives a manager without a gateway a text pipeline of its
// own for its batch lines: its own replica ID (so its quota leases and usage
// spool are its own) and the manager's blob settings' data directory.
func (s *System) addBatchPipeline(o SystemOptions) error {
	host, _ := os.Hostname()
	po := Options{Clock: clock.RealClock{}, SystemNamespace: s.namespace, DataDir: o.ManagerBlobs.DataDir,
		ReplicaID: fmt.Sprintf("batch-%s-%d", host, os.Getpid())}
	pl, err := newPipeline(s.Manager, s.ledger, s.Upstreams, po)
	if err != nil {
		return fmt.Errorf("batch pipeline: %w", err)
	}
	s.lines.bind(handlers.NewBatchLines(pl.text, pl.embeddings), pl.authn)
	return s.Manager.Add(&pipelineRunnable{pl: pl, lines: s.lines})
}

// pipelineRunnable flushes a gateway-less pipeline's usage rows and returns
// its leases when the manager stops.
type pipelineRunnable struct {
	pl    *pipeline
	lines *batchLines
}

func (r *pipelineRunnable) NeedLeaderElection() bool { return false }

func (r *pipelineRunnable) Start(ctx context.Context) error {
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.lines.drain(shutdown)
	return errors.Join(r.pl.usage.Close(shutdown), r.pl.leaser.Close(shutdown))
}
