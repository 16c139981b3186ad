package console_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/console"
)

// TestServesTheSourcesByteForByte: every file under assets is served as it
// is in the repository (there is no build step between them), with the
// security headers, and nothing else is served.
func TestServesTheSourcesByteForByte(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	src := os.DirFS("assets")
	n := 0
	err := fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		want, err := fs.ReadFile(src, name)
		if err != nil {
			return err
		}
		resp, err := http.Get(srv.URL + console.Prefix + name)
		if err != nil {
			return err
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("GET %s = %d, %d bytes; want 200 and the %d bytes of assets/%s", name, resp.StatusCode, len(got), len(want), name)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != console.SecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q", name, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("ETag") == "" {
			t.Errorf("GET %s: headers %v, want nosniff and an ETag", name, resp.Header)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked %d files, want the whole console", n)
	}
	for _, path := range []string{console.Prefix, console.Prefix + "index.html"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s = %d %q, want the page", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{console.Prefix + "nope.js", console.Prefix + "../console.go", console.Prefix + "js/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, resp.StatusCode)
		}
	}
	resp, err := http.Post(srv.URL+console.Prefix+"index.html", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

// TestAssetsWeighLessThan300KBGzipped: the whole console, each file
// gzipped as a server would send it.
func TestAssetsWeighLessThan300KBGzipped(t *testing.T) {
	total := 0
	err := fs.WalkDir(console.Assets, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.Assets, name)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		total += z.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console assets: %d bytes gzipped", total)
	if total > 300<<10 {
		t.Errorf("console assets are %d bytes gzipped, over the 300 KiB budget", total)
	}
}
