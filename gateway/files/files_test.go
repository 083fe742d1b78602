package files

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/store"
)

type fixture struct {
	files *Store
	dir   string
	clock *clocktesting.FakeClock
}

func newFixture(t *testing.T, max int64) fixture {
	t.Helper()
	ledger, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	dir := t.TempDir()
	blobs, err := blob.OpenLocal(blob.Config{Dir: dir, SigningKey: []byte("0123456789abcdef0123"), BaseURL: func() string { return "http://127.0.0.1" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blobs.Close() })
	c := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	return fixture{files: New(ledger, blobs, Options{MaxBytes: max, Clock: c}), dir: dir, clock: c}
}

// blobCount counts the objects of the local store (fileblob keeps
// attributes beside each object).
func (f fixture) blobCount(t *testing.T) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(f.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasSuffix(p, ".attrs") {
			n++
		}
		return nil
	})
	return n
}

const line = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}` + "\n"

func TestCreateGetOpenDeleteAreTenantScoped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fx := newFixture(t, 0)

	f, err := fx.files.Create(ctx, Upload{UserID: 1, TokenID: 7, Purpose: PurposeBatch, Filename: "in.jsonl"}, strings.NewReader(line))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ID).To(MatchRegexp(`^file-[0-9a-f]{32}$`))
	g.Expect(f.Bytes).To(Equal(int64(len(line))))
	g.Expect(f.CreatedAt).To(Equal(fx.clock.Now()))
	g.Expect(f.ExpiresAt).To(Equal(fx.clock.Now().Add(DefaultTTL)))
	g.Expect(fx.files.MaxBytes()).To(Equal(int64(DefaultMaxBytes)))

	got, err := fx.files.Get(ctx, 1, f.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(f))

	_, rd, err := fx.files.Open(ctx, 1, f.ID)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(rd)
	_ = rd.Close()
	g.Expect(string(body)).To(Equal(line))

	// Another tenant sees nothing and deletes nothing.
	_, err = fx.files.Get(ctx, 2, f.ID)
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(errors.Is(err, store.ErrNotFound)).To(BeTrue())
	_, _, err = fx.files.Open(ctx, 2, f.ID)
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(fx.files.Delete(ctx, 2, f.ID)).To(MatchError(ErrNotFound))

	g.Expect(fx.files.Delete(ctx, 1, f.ID)).To(Succeed())
	_, err = fx.files.Get(ctx, 1, f.ID)
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(fx.files.Delete(ctx, 1, f.ID)).To(MatchError(ErrNotFound))
	g.Expect(fx.blobCount(t)).To(BeZero(), "the blob went with the record")
}

func TestCreateRefusesWithoutLeavingAnything(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		up   Upload
		body string
		want error
	}{
		"over the limit":    {Upload{UserID: 1, Purpose: PurposeBatch, Filename: "a.jsonl"}, strings.Repeat("x", 65), ErrTooLarge},
		"empty":             {Upload{UserID: 1, Purpose: PurposeBatch, Filename: "a.jsonl"}, "", ErrEmpty},
		"other purpose":     {Upload{UserID: 1, Purpose: "fine-tune", Filename: "a.jsonl"}, line, ErrUnsupportedPurpose},
		"output by upload":  {Upload{UserID: 1, Purpose: PurposeBatchOutput, Filename: "a.jsonl"}, line, ErrUnsupportedPurpose},
		"no filename":       {Upload{UserID: 1, Purpose: PurposeBatch}, line, ErrInvalid},
		"no tenant":         {Upload{Purpose: PurposeBatch, Filename: "a.jsonl"}, line, ErrInvalid},
		"filename too long": {Upload{UserID: 1, Purpose: PurposeBatch, Filename: strings.Repeat("a", 256)}, line, ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fx := newFixture(t, 64)
			_, err := fx.files.Create(ctx, tc.up, strings.NewReader(tc.body))
			g.Expect(err).To(MatchError(tc.want))
			list, _, err := fx.files.List(ctx, 1, ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(BeEmpty())
			g.Expect(fx.blobCount(t)).To(BeZero())
		})
	}
	t.Run("exactly the limit", func(t *testing.T) {
		g := NewWithT(t)
		fx := newFixture(t, 64)
		f, err := fx.files.Create(ctx, Upload{UserID: 1, Purpose: PurposeBatch, Filename: "a.jsonl"}, strings.NewReader(strings.Repeat("x", 64)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Bytes).To(Equal(int64(64)))
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestCreateReportsAClientReadFailure(t *testing.T) {
	g := NewWithT(t)
	fx := newFixture(t, 0)
	_, err := fx.files.Create(context.Background(), Upload{UserID: 1, Purpose: PurposeBatch, Filename: "a.jsonl"},
		io.MultiReader(strings.NewReader(line), failingReader{}))
	g.Expect(err).To(MatchError(ErrRead))
	g.Expect(fx.blobCount(t)).To(BeZero())
}

func TestListPagesNewestFirstByPurpose(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fx := newFixture(t, 0)
	var ids []string
	for i := range 5 {
		var f File
		var err error
		if i%2 == 0 {
			f, err = fx.files.Create(ctx, Upload{UserID: 1, Purpose: PurposeBatch, Filename: "in.jsonl"}, strings.NewReader(line))
		} else {
			f, err = fx.files.WriteResult(ctx, 1, PurposeBatchOutput, "out.jsonl", 0, strings.NewReader(line))
		}
		g.Expect(err).NotTo(HaveOccurred())
		ids = append(ids, f.ID)
		fx.clock.Step(time.Second)
	}
	_, err := fx.files.Create(ctx, Upload{UserID: 2, Purpose: PurposeBatch, Filename: "other.jsonl"}, strings.NewReader(line))
	g.Expect(err).NotTo(HaveOccurred())

	idsOf := func(fs []File) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.ID
		}
		return out
	}
	page, more, err := fx.files.List(ctx, 1, ListOptions{Limit: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOf(page)).To(Equal([]string{ids[4], ids[3]}))
	g.Expect(more).To(BeTrue())
	page, more, err = fx.files.List(ctx, 1, ListOptions{Limit: 2, After: ids[3]})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOf(page)).To(Equal([]string{ids[2], ids[1]}))
	g.Expect(more).To(BeTrue())
	page, more, err = fx.files.List(ctx, 1, ListOptions{Limit: 2, After: ids[1]})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOf(page)).To(Equal([]string{ids[0]}))
	g.Expect(more).To(BeFalse())

	page, _, err = fx.files.List(ctx, 1, ListOptions{Purpose: PurposeBatchOutput})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOf(page)).To(Equal([]string{ids[3], ids[1]}))
	page, _, err = fx.files.List(ctx, 1, ListOptions{Ascending: true, Limit: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOf(page)).To(Equal([]string{ids[0], ids[1]}))

	_, _, err = fx.files.List(ctx, 2, ListOptions{After: ids[0]})
	g.Expect(err).To(MatchError(ErrNotFound), "a cursor of another tenant's file")
}

func TestWriteResultAndSweep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fx := newFixture(t, 0)
	out, err := fx.files.WriteResult(ctx, 3, PurposeBatchOutput, "batch_x_output.jsonl", 0, strings.NewReader(""))
	g.Expect(err).NotTo(HaveOccurred(), "an empty result file is a valid result")
	g.Expect(out.Purpose).To(Equal(PurposeBatchOutput))
	g.Expect(out.TokenID).To(BeZero())
	fx.clock.Step(time.Hour)
	kept, err := fx.files.Create(ctx, Upload{UserID: 3, Purpose: PurposeBatch, Filename: "in.jsonl"}, strings.NewReader(line))
	g.Expect(err).NotTo(HaveOccurred())

	fx.clock.Step(DefaultTTL - time.Minute)
	n, err := fx.files.Sweep(ctx, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	_, err = fx.files.Get(ctx, 3, out.ID)
	g.Expect(err).To(MatchError(ErrNotFound))
	_, err = fx.files.Get(ctx, 3, kept.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fx.blobCount(t)).To(Equal(1))
}
