package upstream

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"unsafe"
)

// Upstreams echo what they were sent: an error may quote the request's
// Authorization header. What Sluice relays is scrubbed first. Every relayed
// body and header loses the edge's credential secret; an error answer (a
// body Sluice did not ask for) also loses anything shaped like a key. A
// successful answer is the model's output, which may legitimately contain
// key-shaped text (code samples, docs), so only the exact secret is masked
// there.
//
// Masking overwrites in place with as many bytes as it hides: a JSON
// string stays valid JSON and a Content-Length stays true, which lets an
// answer that is passed on as it arrives keep its upstream's length.

// maskByte replaces each byte of a masked secret.
const maskByte = '*'

func mask(b []byte) {
	for i := range b {
		b[i] = maskByte
	}
}

// maskSecret overwrites every occurrence of secret in b. It costs one
// vectorised bytes.Index over b when secret does not occur.
func maskSecret(b []byte, secret string) {
	if secret == "" {
		return
	}
	s := asBytes(secret)
	for i := 0; ; {
		j := bytes.Index(b[i:], s)
		if j < 0 {
			return
		}
		mask(b[i+j : i+j+len(s)])
		i += j + len(s)
	}
}

// asBytes views s as bytes without copying, for reading only: the secret
// is looked for in every relayed chunk, and a copy per attempt would be an
// allocation per request.
func asBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// keyShaped finds credentials in text. Each alternative captures the secret
// part alone in a group, so the words around it stay readable: a scheme's
// token (Bearer, Basic, fal's "Key id:secret"), the prefixed keys of
// OpenAI-style ("sk-…", which covers sk-proj- and Anthropic's sk-ant-) and
// Google ("AIza…") providers, and the value of a header or field named like
// one (x-api-key, api-key, authorization), quoted or not.
var keyShaped = regexp.MustCompile(
	`(?i:\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=:-]{8,})` +
		`|\bKey\s+([A-Za-z0-9._-]+:[A-Za-z0-9._-]+)` +
		`|\b(sk-[A-Za-z0-9_-]{8,})` +
		`|\b(AIza[0-9A-Za-z_-]{20,})` +
		`|(?i:x-api-key|x-goog-api-key|api[-_ ]?key|authorization)["']?\s*[:=]\s*["']?(?:(?i:bearer|basic)\s+)?([^\s"',;&}]{4,})`)

// maskKeys overwrites what looks like a credential in b, an error answer.
func maskKeys(b []byte) {
	for _, m := range keyShaped.FindAllSubmatchIndex(b, -1) {
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				mask(b[m[g]:m[g+1]])
			}
		}
	}
}

// scrubError masks the secret, in any form a reader would decode
// (maskEncoded), and anything key-shaped in an error answer.
func scrubError(b []byte, secret string) {
	maskEncoded(b, secret)
	maskKeys(b)
}

// passHeaders copies the upstream headers a caller may see (passedHeaders)
// to dst, scrubbed as their answer's body is.
func passHeaders(dst, src http.Header, secret string, errorAnswer bool) {
	for _, k := range passedHeaders {
		v := src[k]
		if len(v) == 0 || v[0] == "" {
			continue
		}
		if s := scrubbed(v[0], secret, errorAnswer); s != v[0] {
			dst[k] = []string{s}
			continue
		}
		// The first value, as Header.Get reads it. The upstream's header is
		// this execution's alone, so the caller's can share its slice; cut
		// to capacity 1, Header.Add copies it instead of writing into it.
		dst[k] = v[:1:1]
	}
}

// scrubHeader masks every value of an answer's header h in place, as
// scrubbed does, for answers whose headers others pass on (job calls).
func scrubHeader(h http.Header, secret string, errorAnswer bool) {
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = scrubbed(v, secret, errorAnswer)
		}
	}
}

// scrubbed returns the header value v with the secret masked, and for an
// error answer its encoded forms and anything key-shaped too (scrubError);
// v itself when there is nothing to mask, without allocating for an
// answer that is not an error.
func scrubbed(v, secret string, errorAnswer bool) string {
	if !errorAnswer {
		if secret == "" || !strings.Contains(v, secret) {
			return v
		}
		b := []byte(v)
		maskSecret(b, secret)
		return string(b)
	}
	b := []byte(v)
	if scrubError(b, secret); string(b) == v {
		return v
	}
	return string(b)
}

// passedHeaders are the upstream headers passed on to the caller (in
// canonical form): the answer's type, and what a caller can act on.
var passedHeaders = []string{"Content-Type", "Retry-After", "Retry-After-Ms"}
