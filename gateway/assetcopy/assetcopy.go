package assetcopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	gcblob "gocloud.dev/blob"

	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
	"github.com/modelgate/modelgate/gateway/uploads"
)

// Size caps of on-demand storage under private asset review: images up to
// 20 MiB, videos and audio up to 100 MiB.
const (
	MaxImageBytes = 20 << 20
	MaxMediaBytes = 100 << 20
)

// DefaultTimeout bounds one copy: 100 MiB at a modest rate.
const DefaultTimeout = 5 * time.Minute

const maxRedirects = 3

// Kinds are the accepted types and caps per review asset type: the upload
// endpoints' types (images JPEG, PNG, WebP, GIF; video MP4, MOV, WebM;
// audio MP3, WAV, M4A) with the review caps.
var Kinds = map[string]*uploads.Kind{
	"image": {Name: "image", MaxBytes: MaxImageBytes, Types: uploads.Image.Types, Excluded: uploads.Image.Excluded},
	"video": {Name: "video", MaxBytes: MaxMediaBytes, Types: uploads.Video.Types, Excluded: uploads.Video.Excluded},
	"audio": {Name: "audio", MaxBytes: MaxMediaBytes, Types: uploads.Audio.Types, Excluded: uploads.Audio.Excluded},
}

// Refusal is an asset that cannot be used: empty, too large, of the wrong
// type, or not downloadable. Its message goes to the client as is, so it
// never names the address the URL resolved to.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

func refuse(format string, a ...any) error { return &Refusal{Message: fmt.Sprintf(format, a...)} }

// OwnLinks is the blob store the gateway's own links (its uploads, its
// stored outputs) point into.
type OwnLinks interface {
	// KeyOfLink is the key rawURL names when it is one of the store's own
	// valid links.
	KeyOfLink(ctx context.Context, rawURL string) (key string, ok bool)
	Open(ctx context.Context, key string) (*gcblob.Reader, error)
}

// Copier copies review assets into Blobs.
type Copier struct {
	Blobs uploads.Putter
	// Own, when set, reads a URL that is one of its own links (a file
	// uploaded through POST /v1/uploads/…) from the store instead of over
	// the network: those links exist to feed generation requests, and
	// the egress guard refuses the gateway's own, non-public address.
	Own OwnLinks
	// Client fetches the assets; nil: a client of Guard's (internal
	// addresses refused, redirects rechecked). NewCopier makes one to keep.
	Client *http.Client
	// Guard decides which addresses a nil Client may dial; nil: public
	// ones only.
	Guard *netguard.Guard
	// Timeout bounds one copy; default DefaultTimeout.
	Timeout time.Duration
}

// Key is where the copy of rawURL of typ goes for a tenant, without its
// extension: one copy per tenant, type and URL.
func Key(namespace, typ, rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return fmt.Sprintf("tenants/%s/review-assets/%s-%s", namespace, typ, hex.EncodeToString(sum[:]))
}

// Copy fetches rawURL and stores it under keyBase plus its type's
// extension. A *Refusal is the asset's fault; any other error is the
// platform's (retry).
func (c *Copier) Copy(ctx context.Context, typ, rawURL, keyBase string) (uploads.Object, error) {
	kind, ok := Kinds[typ]
	if !ok {
		return uploads.Object{}, fmt.Errorf("assetcopy: unknown asset type %q", typ)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if c.Own != nil {
		if key, ok := c.Own.KeyOfLink(ctx, rawURL); ok {
			return c.copyOwn(ctx, kind, key, keyBase)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return uploads.Object{}, refuse("the %s asset could not be downloaded: not a valid URL", typ)
	}
	resp, err := c.client().Do(req)
	if err != nil {
		// Reason, not err: a dial error names the resolved address.
		return uploads.Object{}, refuse("the %s asset could not be downloaded: %s", typ, netguard.Reason(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return uploads.Object{}, refuse("the %s asset could not be downloaded: HTTP %d", typ, resp.StatusCode)
	}
	if resp.ContentLength > kind.MaxBytes {
		return uploads.Object{}, tooLarge(kind)
	}
	if resp.ContentLength == 0 {
		return uploads.Object{}, refuse("the %s asset is empty", typ)
	}
	return c.save(ctx, kind, keyBase, resp.Body)
}

// copyOwn copies one of the store's own objects, checked as a download is.
func (c *Copier) copyOwn(ctx context.Context, kind *uploads.Kind, key, keyBase string) (uploads.Object, error) {
	rd, err := c.Own.Open(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return uploads.Object{}, refuse("the uploaded %s asset no longer exists; upload it again", kind.Name)
	}
	if err != nil {
		return uploads.Object{}, fmt.Errorf("open uploaded asset: %w", err)
	}
	defer func() { _ = rd.Close() }()
	if rd.Size() > kind.MaxBytes {
		return uploads.Object{}, tooLarge(kind)
	}
	return c.save(ctx, kind, keyBase, rd)
}

// save stores an asset's bytes, typed by their content, within its kind's cap.
func (c *Copier) save(ctx context.Context, kind *uploads.Kind, keyBase string, r io.Reader) (uploads.Object, error) {
	typ := kind.Name
	obj, err := uploads.Save(ctx, c.Blobs, kind, keyBase, r)
	switch {
	case errors.Is(err, uploads.ErrEmpty):
		return obj, refuse("the %s asset is empty", typ)
	case errors.Is(err, uploads.ErrUnsupportedType):
		return obj, refuse("the %s asset is not a supported %s (%s); its content was checked, not its name or header", typ, typ, accepted(typ))
	case errors.Is(err, uploads.ErrTooLarge):
		return obj, tooLarge(kind)
	case errors.Is(err, uploads.ErrRead):
		return obj, refuse("the %s asset could not be downloaded: %s", typ, netguard.Reason(err))
	}
	return obj, err
}

func tooLarge(k *uploads.Kind) error {
	return refuse("the %s asset is larger than %d MiB, the private asset review limit", k.Name, k.MaxBytes>>20)
}

func accepted(typ string) string {
	switch typ {
	case "image":
		return "JPEG, PNG, WebP or GIF"
	case "video":
		return "MP4, MOV or WebM"
	}
	return "MP3, WAV or M4A"
}

func (c *Copier) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return guardedClient(c.Guard)
}

// NewCopier returns a Copier into blobs whose one client, kept for the
// process (its transport keeps connections to asset hosts), dials what
// guard allows.
func NewCopier(blobs uploads.Putter, own OwnLinks, guard *netguard.Guard) *Copier {
	return &Copier{Blobs: blobs, Own: own, Guard: guard, Client: guardedClient(guard)}
}

func guardedClient(g *netguard.Guard) *http.Client {
	return g.Client(netguard.ClientOptions{MaxRedirects: maxRedirects})
}
