package jsonfield

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FoldKey returns key, as Members passes it, the way the most lenient of
// the JSON readers an upstream may use would compare it with a field name,
// so that two keys some reader could take for the same lower-case ASCII
// field fold to the same string:
//   - escapes are undone, and invalid UTF-8 and lone surrogates read as
//     U+FFFD, as encoding/json reads them ("mod\u0065l" is "model");
//   - the key ends at its first NUL, as it does for a reader that keeps keys
//     in C strings ("model\u0000x" is "model");
//   - each letter is lowered to the ASCII letter of its simple case folding
//     when it has one, as encoding/json matches field names ("ſtream" is
//     "stream", the Kelvin sign is "k"), and the ligatures, ß and dotless ı
//     become the ASCII letters Python's casefold or upper give them ("ﬆream"
//     is "stream").
//
// A plain key (see PlainKey) folds to itself. FoldKey allocates: it is for
// the bodies the fast path leaves to encoding/json.
func FoldKey(key []byte) string {
	s := string(key)
	if strings.IndexByte(s, '\\') >= 0 {
		quoted := make([]byte, 0, len(key)+2)
		quoted = append(append(append(quoted, '"'), key...), '"')
		_ = json.Unmarshal(quoted, &s) // a key Members passed always unquotes
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if ascii := foldToASCII(r); ascii != "" {
			b.WriteString(ascii)
			continue
		}
		b.WriteRune(lowerFold(r))
	}
	return b.String()
}

// lowerFold returns r in lower case, or the lower-case ASCII letter in r's
// simple case-folding orbit if there is one.
func lowerFold(r rune) rune {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
	}
	return unicode.ToLower(r)
}

// foldToASCII returns the ASCII letters a full case folding (or upper
// casing, for ı) turns r into, or "" when r has no such folding.
func foldToASCII(r rune) string {
	switch r {
	case 'ß', 'ẞ':
		return "ss"
	case 'ı':
		return "i"
	case 'ﬀ':
		return "ff"
	case 'ﬁ':
		return "fi"
	case 'ﬂ':
		return "fl"
	case 'ﬃ':
		return "ffi"
	case 'ﬄ':
		return "ffl"
	case 'ﬅ', 'ﬆ':
		return "st"
	}
	return ""
}
