package h1

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// writeHead formats req's request line and header fields into a buffer
// from the pool, as net/http writes them: Host first, a default
// User-Agent, Content-Length (0 for a POST, PUT or PATCH without a body),
// and every field of req.Header with its name and values checked.
func writeHead(req *http.Request) (*[]byte, error) {
	if !httpguts.ValidHeaderFieldName(req.Method) {
		return nil, fmt.Errorf("h1: invalid method %q", req.Method)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return nil, fmt.Errorf("h1: invalid Host %q", host)
	}
	bp := writeBufs.Get().(*[]byte)
	b := append((*bp)[:0], req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	ua := "Go-http-client/1.1"
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		b = appendField(b, "User-Agent", ua)
	}
	if req.Close {
		b = appendField(b, "Connection", "close")
	}
	switch {
	case req.Body != nil && req.Body != http.NoBody:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, req.ContentLength, 10)
		b = append(b, "\r\n"...)
	case req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch:
		b = appendField(b, "Content-Length", "0")
	}
	for name, values := range req.Header {
		if excluded[name] || (req.Close && name == "Connection") {
			continue
		}
		if !httpguts.ValidHeaderFieldName(name) {
			*bp = b
			putWriteBuf(bp)
			return nil, fmt.Errorf("h1: invalid header field name %q", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				*bp = b
				putWriteBuf(bp)
				return nil, fmt.Errorf("h1: invalid header field value for %q", name)
			}
			b = appendField(b, name, textproto.TrimString(v))
		}
	}
	*bp = append(b, "\r\n"...)
	return bp, nil
}

// excluded are the fields writeHead writes from the request itself.
var excluded = map[string]bool{
	"Host": true, "User-Agent": true, "Content-Length": true,
	"Transfer-Encoding": true, "Trailer": true,
}

func appendField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, "\r\n"...)
}
