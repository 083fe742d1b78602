package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/gateway/uploads/uploadstest"
)

// assets is a loopback file server standing in for the public hosts of
// review assets (the stack's guard allows loopback). A file's content
// follows its name: the extension gives the type; "empty" serves nothing,
// "fake" serves HTML whatever the extension, "huge" an image just over the
// 20 MiB review cap without a Content-Length. A video named "<n>s.mp4"
// lasts n seconds.
var assets = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	name := path.Base(r.URL.Path)
	switch {
	case strings.Contains(name, "empty"):
		return
	case strings.Contains(name, "fake"):
		_, _ = io.WriteString(w, "<!doctype html><html><body>not a file</body></html>")
		return
	case strings.Contains(name, "huge"):
		_, _ = io.Copy(w, uploadstest.Endless(uploadstest.PNG(8, 8), 20<<20+1))
		return
	}
	switch path.Ext(name) {
	case ".png":
		_, _ = w.Write(uploadstest.PNG(8, 8))
	case ".mp4": // "<seconds>s.mp4" lasts that long, anything else 2 s
		secs, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(name, ".mp4"), "s"), 64)
		if err != nil {
			secs = 2
		}
		_, _ = w.Write(uploadstest.Movie("isom", secs, 256, true))
	case ".mp3":
		_, _ = w.Write(uploadstest.MP3(8))
	case ".wav":
		_, _ = w.Write(uploadstest.WAV(800))
	default:
		http.NotFound(w, r)
	}
}))

// cdn is the asset server's base URL.
var cdn = assets.URL
