// Package bench measures Sluice against a bare reverse-proxy hop in front of
// the same simulated upstream: throughput and CPU per request under load
// (run.sh, with wrk), streaming time to first byte and event spacing
// (ttfb/), allocations per proxied request and caller-disconnect
// propagation (the Go benchmarks and tests of this package). Results live in
// RESULTS.md.
//
// The non-test code here is shared by those tools: the baseline hop and the
// SSE arrival clock. It depends only on the standard library, so the
// baseline carries none of Sluice's code.
package bench

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// NewHop returns the baseline: an httputil.ReverseProxy to target that
// flushes every write (FlushInterval -1, so a stream is passed on event by
// event) over a transport whose idle pool holds enough connections for
// hundreds of concurrent callers. It forwards requests unchanged (the
// caller's Authorization included); it is what any gateway costs at least.
func NewHop(target *url.URL) *httputil.ReverseProxy {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			if r.Out.Body != nil && r.Out.ContentLength > 0 {
				r.Out.Body = &sizedBody{ReadCloser: r.Out.Body, left: r.Out.ContentLength}
			}
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// sizedBody ends a request body after its Content-Length without reading
// further. Without it a bare ReverseProxy cuts about one stream in a few
// thousand (golang/go#40747): once the upstream answers, the HTTP/1 server
// closes the unread rest of the inbound body as it writes the response
// headers, and the transport's check for bytes beyond Content-Length, a read
// that can come just after, fails on the closed body and tears down the
// upstream connection mid-stream ("use of closed network connection").
type sizedBody struct {
	io.ReadCloser
	left int64
}

func (b *sizedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		err = io.EOF
	}
	return n, err
}
