// Package console is the operator's web console: a single page, in plain
// HTML, CSS and JavaScript modules embedded in the binary, served under
// /console/ on the admin listener. It is a client of the admin API and
// nothing more: every number it shows and every change it makes goes
// through /admin/…, authenticated by the session cookie the admin package
// issues at sign-in. There is no build step, so the files under assets are
// both the sources and what is served, byte for byte.
//
// It must not import anything of Sluice's: the admin package mounts it.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed assets
var embedded embed.FS

// Assets are the console's files, rooted at assets/.
var Assets = func() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}()

// Prefix is where the console is served.
const Prefix = "/console/"

// SecurityPolicy is the Content-Security-Policy of every console answer:
// scripts, styles and data only from the admin listener itself, nothing
// inline, no framing. The charts are SVG built through the DOM, which needs
// no exception.
const SecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console's files under Prefix. The page is one
// document, index.html, whose script routes by the URL's fragment; a path
// that names no file is 404. Answers carry the security headers and an
// ETag of the file's content, and are revalidated on every load, so a new
// binary's console is never mixed with a cached old one.
func Handler() http.Handler {
	tags := make(map[string]string)
	_ = fs.WalkDir(Assets, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Assets, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tags[name] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", SecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		tag, ok := tags[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f, err := Assets.Open(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		h.Set("ETag", tag)
		// Embedded files have no modification time: the ETag alone answers
		// a revalidation.
		http.ServeContent(w, r, name, time.Time{}, f.(io.ReadSeeker))
	})
}
