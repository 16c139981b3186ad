package sluice

import (
	"bytes"
	"math"
	"unicode/utf8"
)

// A request's tokens are estimated before it runs, to reserve them against
// token-per-minute limits and to bound what it may cost; the measured usage
// corrects the reservation after. Tokenizers spend tokens by script: Latin
// text and code take about four characters a token, while CJK text takes
// about one token a character (often a little less). A byte count alone
// (the estimate before this one) under-reserved nothing in English but
// over-reserved Chinese threefold, since a CJK character is three bytes of
// UTF-8. So the estimate counts characters by script.

// TextSize is how much text a request body holds, by script. The whole body
// is counted, JSON syntax and field names included, so an estimate made from
// it errs high.
type TextSize struct {
	Chars int // characters other than CJK
	CJK   int // CJK ideographs, kana, hangul, CJK punctuation and fullwidth forms
}

// MeasureText counts body's characters by script. A JSON escape \uXXXX
// counts as the one character it stands for (SDKs that escape every
// non-ASCII character send Chinese so). A body in ASCII without escapes,
// the common case, is counted without decoding it.
func MeasureText(body []byte) TextSize {
	if ascii(body) && bytes.IndexByte(body, '\\') < 0 {
		return TextSize{Chars: len(body)}
	}
	var t TextSize
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\' && i+5 < len(body) && body[i+1] == 'u':
			if r, ok := hex4(body[i+2 : i+6]); ok {
				t.add(r)
				i += 6
				continue
			}
			t.Chars++
			i++
		case c < utf8.RuneSelf:
			t.Chars++
			i++
		default:
			r, n := utf8.DecodeRune(body[i:])
			t.add(r)
			i += n
		}
	}
	return t
}

func (t *TextSize) add(r rune) {
	if IsCJK(r) {
		t.CJK++
	} else {
		t.Chars++
	}
}

// ascii reports whether b is all ASCII, eight bytes at a time.
func ascii(b []byte) bool {
	const high = 0x8080808080808080
	for len(b) >= 8 {
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if w&high != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// IsCJK reports whether r is written in a CJK script (ideographs, kana,
// hangul, CJK punctuation, fullwidth forms): a tokenizer spends about a
// token on each.
func IsCJK(r rune) bool {
	switch {
	case r < 0x3000:
		return false
	case r <= 0x30FF: // CJK punctuation, hiragana, katakana
		return true
	case 0x3400 <= r && r <= 0x4DBF, 0x4E00 <= r && r <= 0x9FFF: // ideographs and extension A
		return true
	case 0xAC00 <= r && r <= 0xD7AF: // hangul syllables
		return true
	case 0xF900 <= r && r <= 0xFAFF, 0xFF00 <= r && r <= 0xFFEF: // compatibility ideographs, fullwidth forms
		return true
	case 0x20000 <= r && r <= 0x3FFFF: // ideographs, extensions B and later
		return true
	}
	return false
}

// MaxTokenEstimate caps a request's token estimate. A reservation is
// compared with token limits, so what matters is that it never overflows
// (max_tokens 9223372036854775807 once wrapped it to nothing reserved) and
// that it stays above any limit one could configure: a request asking for
// more than a whole window is then refused or runs alone, never beside
// others. 2^40 tokens is far past any budget and far from overflowing an
// int64 sum.
const MaxTokenEstimate = 1 << 40

// TokenEstimate is how many characters of each script make a token. An
// alias may set its own (its models' tokenizers); a field left zero takes
// DefaultTokenEstimate's.
type TokenEstimate struct {
	CharsPerToken    float64 // characters other than CJK per token
	CJKCharsPerToken float64 // CJK characters per token
}

// DefaultTokenEstimate is four characters a token, and one CJK character a
// token.
var DefaultTokenEstimate = TokenEstimate{CharsPerToken: 4, CJKCharsPerToken: 1}

// orDefault is e with DefaultTokenEstimate's value for each field that is
// not positive (an alias may set one and leave the other).
func (e TokenEstimate) orDefault() TokenEstimate {
	if !(e.CharsPerToken > 0) {
		e.CharsPerToken = DefaultTokenEstimate.CharsPerToken
	}
	if !(e.CJKCharsPerToken > 0) {
		e.CJKCharsPerToken = DefaultTokenEstimate.CJKCharsPerToken
	}
	return e
}

// Prompt is the estimated tokens of a prompt of size t, at least 1 and at
// most MaxTokenEstimate.
func (e TokenEstimate) Prompt(t TextSize) int64 {
	e = e.orDefault()
	n := math.Ceil(float64(t.Chars)/e.CharsPerToken) + math.Ceil(float64(t.CJK)/e.CJKCharsPerToken)
	return int64(max(1, min(n, MaxTokenEstimate)))
}

// PromptEstimate is the estimated tokens of the request's prompt, by its
// alias's estimate.
func (r *Request) PromptEstimate() int64 { return r.Estimate.Prompt(r.Text) }

// Reserve is the tokens the request reserves against token limits: its
// prompt's estimate and the output it allows, together at most
// MaxTokenEstimate. A token count (CountTokens) reserves nothing.
func (r *Request) Reserve() int {
	if r.CountTokens {
		return 0
	}
	prompt := r.PromptEstimate()
	return int(prompt + min(max(r.Output, 0), MaxTokenEstimate-prompt))
}
