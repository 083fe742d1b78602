package handlers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/store"
	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
	"github.com/modelgate/modelgate/test/framework"
)

// formPart is one part of a multipart upload: a file when filename or
// body is set, else a plain field.
type formPart struct {
	name, filename, contentType string
	value                       string
	body                        io.Reader
}

func filePart(filename, contentType string, data []byte) formPart {
	return formPart{name: "file", filename: filename, contentType: contentType, body: bytes.NewReader(data)}
}

// postMultipart streams parts through an io.Pipe into the request body:
// the client never holds a file in memory either.
func postMultipart(path, key string, parts ...formPart) (int, map[string]any) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for _, p := range parts {
				if p.body == nil {
					if err := mw.WriteField(p.name, p.value); err != nil {
						return err
					}
					continue
				}
				h := textproto.MIMEHeader{}
				h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, p.name, p.filename))
				h.Set("Content-Type", p.contentType)
				w, err := mw.CreatePart(h)
				if err != nil {
					return err
				}
				if _, err := io.Copy(w, p.body); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	defer pr.Close() // stops the writer when the server answered early
	req, err := http.NewRequest("POST", stack.BaseURL+path, pr)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	Expect(dec.Decode(&out)).To(Succeed())
	return resp.StatusCode, out
}

func fetch(u string) (int, []byte, string) {
	resp, err := http.Get(u)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, b, resp.Header.Get("Content-Type")
}

// heapPeak runs fn while sampling the heap every millisecond, with the GC
// made eager so that garbage does not hide what is live. It returns the
// peak growth of the heap over the baseline and the bytes allocated.
func heapPeak(fn func()) (peak, allocated uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var max atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > max.Load() {
				max.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	if m := max.Load(); m > base.HeapAlloc {
		peak = m - base.HeapAlloc
	}
	return peak, end.TotalAlloc - base.TotalAlloc
}

var _ = Describe("upload endpoints", func() {
	var acct *framework.Account

	BeforeEach(func() {
		var err error
		acct, err = stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
	})

	record := func(userID int64, id string) (store.Upload, error) { return stack.Ledger.GetUpload(ctx, userID, id) }

	DescribeTable("accepts real files, typed by their bytes, at a URL that serves them",
		func(path, filename, declared string, data []byte, mimeType string) {
			code, body := postMultipart(path, acct.Key, filePart(filename, declared, data))
			Expect(code).To(Equal(200), "%v", body)
			Expect(body["success"]).To(BeTrue())
			Expect(body["message"]).To(Equal(""))
			d := body["data"].(map[string]any)
			Expect(d["id"]).To(MatchRegexp(`^upl_[0-9a-f]{32}$`))
			Expect(d["mime_type"]).To(Equal(mimeType))
			Expect(num(d["size"])).To(Equal(fmt.Sprint(len(data))))

			status, served, ctype := fetch(d["url"].(string))
			Expect(status).To(Equal(200))
			Expect(served).To(Equal(data))
			Expect(ctype).To(Equal(mimeType))

			rec, err := record(acct.Tenant.Status.UserID, d["id"].(string))
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.TokenID).To(Equal(acct.Token.Status.TokenID))
			Expect(rec.Purpose).To(Equal("generation"))
			Expect(rec.MimeType).To(Equal(mimeType))
			Expect(rec.Size).To(Equal(int64(len(data))))
			Expect(rec.BlobKey).To(HavePrefix(fmt.Sprintf("uploads/%d/", acct.Tenant.Status.UserID)))
			Expect(rec.ExpiresAt.Sub(rec.CreatedAt)).To(Equal(7*24*time.Hour), "the default --upload-ttl")
		},
		Entry("PNG", "/v1/uploads/images", "a.png", "image/png", uploadstest.PNG(64, 48), "image/png"),
		Entry("JPEG", "/v1/uploads/images", "a.jpg", "image/jpeg", uploadstest.JPEG(64, 48), "image/jpeg"),
		Entry("GIF", "/v1/uploads/images", "a.gif", "image/gif", uploadstest.GIF(32, 32), "image/gif"),
		Entry("WebP", "/v1/uploads/images", "a.webp", "image/webp", uploadstest.WebP(), "image/webp"),
		Entry("a PNG whatever its name and declared type", "/v1/uploads/images", "photo.bin", "application/octet-stream", uploadstest.PNG(8, 8), "image/png"),
		Entry("WAV", "/v1/uploads/audios", "a.wav", "audio/wav", uploadstest.WAV(8000), "audio/wav"),
		Entry("MP3", "/v1/uploads/audios", "a.mp3", "audio/mpeg", uploadstest.MP3(20), "audio/mpeg"),
		Entry("M4A", "/v1/uploads/audios", "a.m4a", "audio/x-m4a", uploadstest.Movie("M4A ", 4, 4096, true), "audio/mp4"),
		Entry("MP4", "/v1/uploads/videos", "a.mp4", "video/mp4", uploadstest.Movie("isom", 4, 4096, false), "video/mp4"),
		Entry("MOV", "/v1/uploads/videos", "a.mov", "video/quicktime", uploadstest.Movie("qt  ", 4, 4096, true), "video/quicktime"),
		Entry("WebM", "/v1/uploads/videos", "a.webm", "video/webm", uploadstest.WebMMovie(4, 4096), "video/webm"),
	)

	It("records the purpose, whether it comes before or after the file", func() {
		for _, parts := range [][]formPart{
			{{name: "purpose", value: "reference"}, filePart("a.png", "image/png", uploadstest.PNG(4, 4))},
			{filePart("a.png", "image/png", uploadstest.PNG(4, 4)), {name: "purpose", value: "reference"}},
		} {
			code, body := postMultipart("/v1/uploads/images", acct.Key, parts...)
			Expect(code).To(Equal(200), "%v", body)
			rec, err := record(acct.Tenant.Status.UserID, body["data"].(map[string]any)["id"].(string))
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.Purpose).To(Equal("reference"))
		}
	})

	DescribeTable("refuses with 400 and the contract's message",
		func(path string, parts []formPart, message string) {
			code, body := postMultipart(path, acct.Key, parts...)
			Expect(code).To(Equal(400))
			Expect(body).To(Equal(map[string]any{"success": false, "message": message}))
		},
		Entry("a PNG renamed .mp3 to the audio endpoint", "/v1/uploads/audios",
			[]formPart{filePart("song.mp3", "audio/mpeg", uploadstest.PNG(16, 16))}, "unsupported or invalid audio: allowed MP3, WAV, M4A"),
		Entry("a text file named .png", "/v1/uploads/images",
			[]formPart{filePart("pic.png", "image/png", []byte("hello, I am text\n"))}, "unsupported file type: allowed JPEG, PNG, WebP, GIF"),
		Entry("a WAV to the image endpoint", "/v1/uploads/images",
			[]formPart{filePart("a.wav", "audio/wav", uploadstest.WAV(100))}, "unsupported file type: allowed JPEG, PNG, WebP, GIF"),
		Entry("a missing file", "/v1/uploads/images",
			[]formPart{{name: "purpose", value: "generation"}}, "file is required"),
		Entry("a purpose over 64 characters", "/v1/uploads/images",
			[]formPart{filePart("a.png", "image/png", uploadstest.PNG(4, 4)), {name: "purpose", value: strings.Repeat("p", 65)}}, "purpose must be at most 64 characters"),
		Entry("an M4A audio to the video endpoint", "/v1/uploads/videos",
			[]formPart{filePart("a.mp4", "video/mp4", uploadstest.M4A(1024))}, "unsupported or invalid video: allowed MP4, MOV, WebM"),
		Entry("an M4A whose headers give no duration", "/v1/uploads/audios",
			[]formPart{filePart("a.m4a", "audio/x-m4a", uploadstest.M4A(1024))}, "unsupported or invalid audio: allowed MP3, WAV, M4A"),
		Entry("a WebM whose headers give no duration", "/v1/uploads/videos",
			[]formPart{filePart("a.webm", "video/webm", uploadstest.WebM(1024))}, "unsupported or invalid video: allowed MP4, MOV, WebM"),
		Entry("a PNG to the video endpoint", "/v1/uploads/videos",
			[]formPart{filePart("a.mp4", "video/mp4", uploadstest.PNG(8, 8))}, "unsupported or invalid video: allowed MP4, MOV, WebM"),
		Entry("a file under another field name", "/v1/uploads/audios",
			[]formPart{{name: "audio", filename: "a.wav", contentType: "audio/wav", body: bytes.NewReader(uploadstest.WAV(100))}}, "file is required"),
	)

	It("refuses a body that is not multipart, and a request without a key", func() {
		code, body, _ := call("POST", "/v1/uploads/images", bearer(acct.Key), map[string]any{"file": "x"})
		Expect(code).To(Equal(400))
		Expect(body["success"]).To(BeFalse())
		Expect(body["message"]).To(ContainSubstring("multipart/form-data"))

		code, body = postMultipart("/v1/uploads/images", "", filePart("a.png", "image/png", uploadstest.PNG(4, 4)))
		Expect(code).To(Equal(401))
		Expect(body["success"]).To(BeFalse())
		Expect(body["message"]).NotTo(BeEmpty())
	})

	DescribeTable("refuses oversize files while streaming them, holding none in memory",
		func(path string, head []byte, size int64, message string) {
			var code int
			var body map[string]any
			peak, allocated := heapPeak(func() {
				code, body = postMultipart(path, acct.Key, formPart{name: "file", filename: "big", contentType: "application/octet-stream",
					body: uploadstest.Endless(head, size)})
			})
			Expect(code).To(Equal(400))
			Expect(body).To(Equal(map[string]any{"success": false, "message": message}))
			AddReportEntry(fmt.Sprintf("%d MiB refused", size>>20), fmt.Sprintf("peak heap growth %d KiB, %d KiB allocated (client, server and background)", peak>>10, allocated>>10))
			GinkgoWriter.Printf("%d MiB refused: peak heap growth %d KiB, allocated %d KiB\n", size>>20, peak>>10, allocated>>10)
			// Both figures are process-wide: the suite's manager reconciling
			// earlier specs' objects allocates too (3 MiB allocated and a peak
			// 3.2 MiB seen in CI, against 1.1 MiB alone). A peak of half the
			// smallest refused size, and an allocation of half the size, still
			// prove the body was never held whole.
			Expect(peak).To(BeNumerically("<", 11<<20/2), "peak heap growth (about 1 MiB: gocloud's copy buffer)")
			Expect(allocated).To(BeNumerically("<", size/2), "bytes allocated")
		},
		Entry("an 11 MB image", "/v1/uploads/images", uploadstest.PNG(8, 8), int64(11<<20), "image larger than 10MB"),
		Entry("a 51 MB audio", "/v1/uploads/audios", uploadstest.WAV(100), int64(51<<20), "audio larger than 50MB"),
		Entry("a 101 MB video", "/v1/uploads/videos", uploadstest.MP4("isom", 16), int64(101<<20), "video larger than 100MB"),
	)

	It("keeps upload records and blobs per tenant", func() {
		other, err := stack.NewAccount(ctx, v1.TenantSpec{}, v1.ApiTokenSpec{})
		Expect(err).NotTo(HaveOccurred())
		code, body := postMultipart("/v1/uploads/images", acct.Key, filePart("a.png", "image/png", uploadstest.PNG(4, 4)))
		Expect(code).To(Equal(200))
		id := body["data"].(map[string]any)["id"].(string)

		_, err = record(other.Tenant.Status.UserID, id)
		Expect(errors.Is(err, store.ErrNotFound)).To(BeTrue(), "%v", err)
		Expect(stack.Ledger.DeleteUpload(ctx, other.Tenant.Status.UserID, id)).To(Succeed())
		mine, err := record(acct.Tenant.Status.UserID, id)
		Expect(err).NotTo(HaveOccurred(), "another tenant cannot delete it")
		Expect(mine.BlobKey).To(HavePrefix(fmt.Sprintf("uploads/%d/image/%s", acct.Tenant.Status.UserID, id)))
	})

	It("refuses a signed URL whose signature or expiry was altered", func() {
		code, body := postMultipart("/v1/uploads/images", acct.Key, filePart("a.png", "image/png", uploadstest.PNG(4, 4)))
		Expect(code).To(Equal(200))
		signed := body["data"].(map[string]any)["url"].(string)
		status, _, _ := fetch(signed)
		Expect(status).To(Equal(200))

		u, err := url.Parse(signed)
		Expect(err).NotTo(HaveOccurred())
		q := u.Query()
		Expect(q.Get("signature")).NotTo(BeEmpty())
		Expect(q.Get("expiry")).NotTo(BeEmpty())
		for param, alter := range map[string]func(string) string{
			"signature": func(s string) string { return strings.Repeat("A", len(s)) },
			"expiry":    func(s string) string { return s + "0" },
			"obj":       func(s string) string { return strings.Replace(s, "image", "audio", 1) },
		} {
			tq := url.Values{}
			for k, v := range q {
				tq[k] = append([]string(nil), v...)
			}
			tq.Set(param, alter(q.Get(param)))
			tampered := *u
			tampered.RawQuery = tq.Encode()
			status, _, _ := fetch(tampered.String())
			Expect(status).To(Equal(http.StatusForbidden), "altered %s", param)
		}
	})
})
