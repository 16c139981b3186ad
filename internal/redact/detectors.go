package redact

import (
	"net/netip"
	"strings"
)

// The scanners work on bytes: every value they match is ASCII, and a byte
// of a multi-byte UTF-8 character (Chinese text around a value) is never
// one of the ASCII classes below, so it bounds a value like a space does.

func isDigit(c byte) bool { return c-'0' <= 9 }
func isUpper(c byte) bool { return c-'A' <= 25 }
func isLower(c byte) bool { return c-'a' <= 25 }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) }
func isHex(c byte) bool   { return isDigit(c) || c-'a' <= 5 || c-'A' <= 5 }

// wordByte is what may not touch a value on either side: a value glued to
// letters, digits or _ is part of a longer word (an identifier, a hash).
func wordByte(c byte) bool { return isAlnum(c) || c == '_' }

func before(text string, i int) byte {
	if i <= 0 {
		return ' '
	}
	return text[i-1]
}

func at(text string, i int) byte {
	if i >= len(text) {
		return ' '
	}
	return text[i]
}

// scanEmails finds local@domain.tld: the local part of letters, digits and
// ._%+-, the domain of labels of letters, digits and -, the last label at
// least two letters.
func scanEmails(dst []span, text string, d int) []span {
	for from := 0; ; {
		n := strings.IndexByte(text[from:], '@')
		if n < 0 {
			return dst
		}
		i := from + n
		start := i
		for start > 0 && emailLocal(text[start-1]) {
			start--
		}
		for start < i && text[start] == '.' {
			start++
		}
		end, dots, tld := i+1, 0, 0
		for end < len(text) && (isAlnum(text[end]) || text[end] == '-' || text[end] == '.') {
			if text[end] == '.' {
				if !isAlnum(at(text, end+1)) {
					break
				}
				dots, tld = dots+1, 0
			} else if isUpper(text[end]) || isLower(text[end]) {
				tld++
			} else {
				tld = -len(text) // a digit or - in the last label: not a TLD
			}
			end++
		}
		if start < i && dots > 0 && tld >= 2 && isAlnum(at(text, i+1)) && !fileName(text[i+1:end]) {
			dst = append(dst, span{start, end, d})
		}
		from = max(i+1, end)
	}
}

// fileName reports whether an e-mail's domain is a file's name
// (logo@2x.png), by the extensions that come up in code.
func fileName(domain string) bool {
	ext := domain[strings.LastIndexByte(domain, '.')+1:]
	switch strings.ToLower(ext) {
	case "png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "js", "css", "json", "txt", "md", "go", "py":
		return true
	}
	return false
}

func emailLocal(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

// validCNID checks an 18-character mainland-China resident ID number: 17
// digits and a check character (a digit or X) by ISO 7064 MOD 11-2, with a
// plausible birth month and day.
var cnIDWeights = [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}

func validCNID(s string) bool {
	if s[0] == '0' {
		return false
	}
	month := int(s[10]-'0')*10 + int(s[11]-'0')
	day := int(s[12]-'0')*10 + int(s[13]-'0')
	if month < 1 || month > 12 || day < 1 || day > 31 {
		return false
	}
	sum := 0
	for i, w := range cnIDWeights {
		sum += int(s[i]-'0') * w
	}
	check := "10X98765432"[sum%11]
	last := s[17]
	if last == 'x' {
		last = 'X'
	}
	return last == check
}

// cardGroups reports whether a card number's groups are laid out as cards
// are printed: one run, fours (the last may be shorter), or 4-6-5 / 4-6-4.
func cardGroups(sizes []int) bool {
	if len(sizes) == 1 {
		return true
	}
	if len(sizes) == 3 && sizes[0] == 4 && sizes[1] == 6 && (sizes[2] == 5 || sizes[2] == 4) {
		return true
	}
	for i, n := range sizes {
		if n != 4 && (i < len(sizes)-1 || n > 4) {
			return false
		}
	}
	return true
}

func cardPrefix(n []byte) bool {
	two := int(n[0]-'0')*10 + int(n[1]-'0')
	four := two*100 + int(n[2]-'0')*10 + int(n[3]-'0')
	switch {
	case n[0] == '4': // Visa
	case two >= 51 && two <= 55, four >= 2221 && four <= 2720: // Mastercard
	case two == 34 || two == 37: // Amex
	case four == 6011 || two == 65 || four >= 6440 && four <= 6499: // Discover
	case two == 62: // UnionPay
	case four >= 3528 && four <= 3589: // JCB
	case two == 36 || two == 38 || four >= 3000 && four <= 3059: // Diners
	case two == 50 || two >= 56 && two <= 58 || two == 63 || two == 67: // Maestro
	case four >= 2200 && four <= 2204: // Mir
	default:
		return false
	}
	return true
}

func luhn(digits []byte) bool {
	sum := 0
	for i := len(digits) - 1; i >= 0; i-- {
		v := int(digits[i] - '0')
		if (len(digits)-1-i)%2 == 1 {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// scanIntlPhones finds international phone numbers written with a
// leading + (a country code and 8 to 15 digits in all, in groups split by
// spaces, dashes, dots or a parenthesised area code); scanNumbers finds
// mainland-China mobile numbers written without it.
func scanIntlPhones(dst []span, text string, d int) []span {
	for i := strings.IndexByte(text, '+'); i >= 0; {
		if isDigit(at(text, i+1)) && at(text, i+1) != '0' && !wordByte(before(text, i)) {
			if end := intlPhone(text, i+1); end > 0 {
				dst = append(dst, span{i, end, d})
			}
		}
		n := strings.IndexByte(text[i+1:], '+')
		if n < 0 {
			break
		}
		i += 1 + n
	}
	return dst
}

// cnMobile reports whether n is a mainland-China mobile number, bare or
// after the country code 86, as one run or grouped 3-4-4.
func cnMobile(n []byte, sizes []int) bool {
	if len(n) == 13 && n[0] == '8' && n[1] == '6' {
		if len(sizes) > 1 && sizes[0] != 2 {
			return false
		}
		n = n[2:]
		if len(sizes) > 1 {
			sizes = sizes[1:]
		} else {
			sizes = nil
		}
	}
	if len(n) != 11 || n[0] != '1' || n[1] < '3' {
		return false
	}
	return len(sizes) <= 1 || len(sizes) == 3 && sizes[0] == 3 && sizes[1] == 4
}

// intlPhone returns the end of the international number whose digits start
// at i (after the +), or 0 when it is not one.
func intlPhone(text string, i int) int {
	digits, end, paren := 0, 0, false
	for i < len(text) {
		c := text[i]
		switch {
		case isDigit(c):
			digits++
			i++
			end = i
			continue
		case c == '(' && !paren && isDigit(at(text, i+1)):
			paren = true
		case c == ')' && paren && isDigit(before(text, i)):
			if at(text, i+1) == ' ' && isDigit(at(text, i+2)) {
				i++
			}
		case (c == ' ' || c == '-' || c == '.') && isDigit(at(text, i+1)) || c == ' ' && at(text, i+1) == '(':
		default:
			i = len(text)
			continue
		}
		i++
	}
	if digits < 8 || digits > 15 || wordByte(at(text, end)) {
		return 0
	}
	return end
}

func dottedQuad(text string, i int) (int, bool) {
	for part := 0; part < 4; part++ {
		if part > 0 {
			if at(text, i) != '.' {
				return i, false
			}
			i++
		}
		start, v := i, 0
		for i < len(text) && isDigit(text[i]) && i-start < 3 {
			v = v*10 + int(text[i]-'0')
			i++
		}
		if i == start || v > 255 || (text[start] == '0' && i-start > 1) || isDigit(at(text, i)) {
			return i, false
		}
	}
	return i, true
}

// scanIPv6s finds IPv6 addresses (with :: and an IPv4 tail) not glued to a
// word. To leave code alone (a[1::2], Foo::bar) an address needs three
// groups, or a group of four hex digits.
func scanIPv6s(dst []span, text string, d int) []span {
	for i := strings.IndexByte(text, ':'); i >= 0 && i < len(text); {
		start := i
		for start > 0 && (isHex(text[start-1]) || text[start-1] == ':' || text[start-1] == '.') {
			start--
		}
		end := i
		for end < len(text) && (isHex(text[end]) || text[end] == ':' || text[end] == '.') {
			end++
		}
		for end > start && text[end-1] == '.' {
			end--
		}
		if !wordByte(before(text, start)) && !wordByte(at(text, end)) && plausibleIPv6(text[start:end]) {
			if a, err := netip.ParseAddr(text[start:end]); err == nil && a.Is6() {
				dst = append(dst, span{start, end, d})
			}
		}
		n := strings.IndexByte(text[end:], ':')
		if n < 0 {
			break
		}
		i = end + n
	}
	return dst
}

func plausibleIPv6(s string) bool {
	groups, run, long := 0, 0, false
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ':' {
			if run > 0 {
				groups++
			}
			long = long || run == 4
			run = 0
			continue
		}
		run++
	}
	return strings.Count(s, ":") >= 2 && (groups >= 3 || long)
}

// scanAPIKeys finds tokens shaped like API keys: the known prefixes of
// OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), AWS (AKIA, ASIA), GitHub
// (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), Slack (xoxb- and kin) and
// Google (AIza), and long tokens that look random: at least 32 characters
// mixing upper case, lower case and digits, not hex, with high entropy.
func scanAPIKeys(dst []span, text string, d int) []span {
	for i := 0; i < len(text); {
		if !tokenByte(text[i]) {
			i++
			continue
		}
		end := i
		for end < len(text) && tokenByte(text[end]) {
			end++
		}
		if apiKey(text[i:end]) {
			dst = append(dst, span{i, end, d})
		}
		i = end
	}
	return dst
}

func tokenByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func apiKey(t string) bool {
	if len(t) < 15 { // the shortest key matched (xoxb-…) has 15
		return false
	}
	rest := func(prefix string, min int) bool {
		return strings.HasPrefix(t, prefix) && len(t)-len(prefix) >= min && hasDigit(t[len(prefix):])
	}
	switch {
	case rest("sk-ant-", 20), rest("sk-proj-", 20), rest("sk-", 20):
		return true
	case (strings.HasPrefix(t, "AKIA") || strings.HasPrefix(t, "ASIA")) && len(t) == 20 && upperDigits(t[4:]) && hasDigit(t[4:]):
		return true
	case rest("ghp_", 30), rest("gho_", 30), rest("ghu_", 30), rest("ghs_", 30), rest("ghr_", 30), rest("github_pat_", 30):
		return true
	case len(t) >= 15 && strings.HasPrefix(t, "xox") && strings.IndexByte("baprs", t[3]) >= 0 && t[4] == '-' && hasDigit(t):
		return true
	case rest("AIza", 30):
		return true
	}
	return randomToken(t)
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return true
		}
	}
	return false
}

func upperDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isUpper(s[i]) && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// randomToken reports whether t looks like a random secret: 32 to 256
// characters, upper and lower case and digits all present, not a hex
// string (hashes, UUIDs) and with at least 4.3 bits of entropy per
// character (identifiers in camelCase have far less).
func randomToken(t string) bool {
	if len(t) < 32 || len(t) > 256 {
		return false
	}
	var upper, lower, digits, hex int
	var freq [128]uint16
	for i := 0; i < len(t); i++ {
		c := t[i]
		freq[c]++
		switch {
		case isUpper(c):
			upper++
		case isLower(c):
			lower++
		case isDigit(c):
			digits++
		}
		if isHex(c) || c == '-' {
			hex++
		}
	}
	if upper == 0 || lower == 0 || digits == 0 || hex == len(t) {
		return false
	}
	return entropy(freq[:], len(t)) >= 4.3
}
