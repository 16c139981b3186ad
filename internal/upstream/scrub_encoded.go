package upstream

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"
)

// An upstream that echoes its credential in an error answer may write it
// in a form its reader decodes: JSON escapes (`\/`, or any character as
// `\u0068`), percent-encoding (a URL quoted back), base64 (a header or a
// token inside a larger blob), or several of these nested. A caller's
// client decodes them, and so does a translator reading the error to put
// it in the caller's envelope, so masking the secret as written is not
// enough. An error answer is small and rare, so here Sluice reads it as
// each decoding would, and masks the bytes that decode to the secret.
// Model output (a successful answer, a stream) is not read so: the exact
// secret is all it loses, at the cost of one vectorised search.

// maxDecodings bounds how many decodings are stacked on one another
// (JSON inside JSON inside a URL): each view of the body is searched.
const maxDecodings = 3

// view is a decoding of an error body: text, and for each of its bytes
// the span of the body's bytes it was decoded from.
type view struct {
	text  []byte
	spans []span
}

type span struct{ start, end int }

// maskEncoded overwrites, in the error body b, every run of bytes that a
// JSON, percent or base64 decoding (or several, stacked) turns into the
// secret. Masked bytes become maskByte, which keeps JSON valid: a whole
// escape is masked or none of it.
func maskEncoded(b []byte, secret string) {
	if len(secret) == 0 {
		return
	}
	forms := encodedForms(secret)
	raw := view{text: b, spans: make([]span, len(b))}
	for i := range raw.spans {
		raw.spans[i] = span{i, i + 1}
	}
	views := []view{raw}
	for depth := 0; depth < maxDecodings; depth++ {
		var next []view
		for _, v := range views {
			for _, decode := range [...]func(view) (view, bool){decodeJSONEscapes, decodePercent} {
				if d, ok := decode(v); ok {
					next = append(next, d)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		for _, v := range next {
			maskForms(b, v, forms)
		}
		views = next
	}
	maskForms(b, raw, forms)
}

// maskForms masks in b the bytes of every occurrence of each of forms in
// the view v of b.
func maskForms(b []byte, v view, forms [][]byte) {
	for _, f := range forms {
		for i := 0; ; {
			j := bytes.Index(v.text[i:], f)
			if j < 0 {
				break
			}
			i += j
			mask(b[v.spans[i].start:v.spans[i+len(f)-1].end])
			i += len(f)
		}
	}
}

// encodedForms is the secret as written, and the parts of its base64
// encodings (standard and URL alphabets, padded or not) that do not
// depend on what surrounds it: the secret may begin at any of three
// offsets in a larger encoded text, and the characters its first and
// last bytes share with its neighbours differ with them.
func encodedForms(secret string) [][]byte {
	forms := [][]byte{[]byte(secret)}
	for offset := range 3 {
		in := append(make([]byte, offset), secret...)
		n := len(in)
		// Characters wholly made of the secret's bits: after those that
		// carry the offset's padding bits, up to the last full six bits.
		from, to := (8*offset+5)/6, 8*n/6
		if to-from < 4 { // too short to tell apart from anything else
			continue
		}
		for _, enc := range [...]*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			core := []byte(enc.EncodeToString(in)[from:to])
			if !containsForm(forms, core) {
				forms = append(forms, core)
			}
		}
	}
	return forms
}

func containsForm(forms [][]byte, f []byte) bool {
	for _, g := range forms {
		if bytes.Equal(g, f) {
			return true
		}
	}
	return false
}

// decodeJSONEscapes decodes v's JSON string escapes, wherever they are
// (a body may hold JSON quoted in a string, or escapes outside any), a
// UTF-16 surrogate pair as one character; false when v has none.
func decodeJSONEscapes(v view) (view, bool) {
	t := v.text
	if bytes.IndexByte(t, '\\') < 0 {
		return v, false
	}
	d := view{text: make([]byte, 0, len(t)), spans: make([]span, 0, len(t))}
	changed := false
	for i := 0; i < len(t); {
		n, decoded := jsonEscape(t[i:], &d.text)
		if decoded {
			changed = true
		} else {
			d.text, n = append(d.text, t[i]), 1
		}
		s := span{v.spans[i].start, v.spans[i+n-1].end}
		for len(d.spans) < len(d.text) {
			d.spans = append(d.spans, s)
		}
		i += n
	}
	return d, changed
}

// jsonEscape appends to out what the escape at the start of t decodes to,
// and returns its length; false when t does not start with one.
func jsonEscape(t []byte, out *[]byte) (int, bool) {
	if len(t) < 2 || t[0] != '\\' {
		return 0, false
	}
	if c, ok := simpleEscapes[t[1]]; ok {
		*out = append(*out, c)
		return 2, true
	}
	r, ok := hex4(t, 1)
	if !ok {
		return 0, false
	}
	n := 6
	if r >= 0xD800 && r < 0xDC00 { // a high surrogate: its low one may follow
		if lo, ok := hex4(t[6:], 1); ok && t[6] == '\\' && lo >= 0xDC00 && lo < 0xE000 {
			r, n = 0x10000+(r-0xD800)<<10+(lo-0xDC00), 12
		}
	}
	*out = utf8.AppendRune(*out, r)
	return n, true
}

// hex4 reads the escape `\uXXXX` whose 'u' is t[at], as a code unit.
func hex4(t []byte, at int) (rune, bool) {
	if len(t) < at+5 || t[at] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range t[at+1 : at+5] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// decodePercent decodes v's percent-encoded bytes (%XX); false when it
// has none.
func decodePercent(v view) (view, bool) {
	t := v.text
	if bytes.IndexByte(t, '%') < 0 {
		return v, false
	}
	d := view{text: make([]byte, 0, len(t)), spans: make([]span, 0, len(t))}
	changed := false
	for i := 0; i < len(t); {
		n := 1
		c := t[i]
		if c == '%' && i+2 < len(t) {
			hi, ok1 := hexDigit(t[i+1])
			lo, ok2 := hexDigit(t[i+2])
			if ok1 && ok2 {
				c, n, changed = hi<<4|lo, 3, true
			}
		}
		d.text = append(d.text, c)
		d.spans = append(d.spans, span{v.spans[i].start, v.spans[i+n-1].end})
		i += n
	}
	return d, changed
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
