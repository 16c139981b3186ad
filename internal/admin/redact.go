package admin

import (
	"bytes"
	"strings"
)

// redacted stands in for a password in what the admin API shows. It is a
// valid URL password, so a redacted catalog still parses, and applying it
// back visibly sets no real password.
const redacted = "REDACTED"

// redactPasswords returns doc with every password it can find in a URL
// replaced by "REDACTED": the password of a URL's user info
// (postgres://user:PASSWORD@host) and the value of a query parameter whose
// name ends in "password" (?sslpassword=…). It reads doc as text, not YAML,
// so a URL in a comment or under any field is covered too. doc is returned
// as it is when it holds no password; it is never modified.
func redactPasswords(doc []byte) []byte {
	var out []byte // nil until a password is found
	last := 0      // doc[last:] is still to be copied to out
	cut := func(from, to int) {
		out = append(append(out, doc[last:from]...), redacted...)
		last = to
	}
	for i := 0; i < len(doc); i++ {
		switch {
		case bytes.HasPrefix(doc[i:], []byte("://")):
			// The authority runs to the first byte that cannot be in it;
			// its user info ends at its last '@', as url.Parse reads it.
			start := i + len("://")
			end := start
			for end < len(doc) && inAuthority(doc[end]) {
				end++
			}
			if at := bytes.LastIndexByte(doc[start:end], '@'); at >= 0 {
				if colon := bytes.IndexByte(doc[start:start+at], ':'); colon >= 0 && colon+1 < at {
					cut(start+colon+1, start+at)
				}
			}
			i = end - 1
		case doc[i] == '?' || doc[i] == '&':
			name := i + 1
			eq := name
			for eq < len(doc) && inParamName(doc[eq]) {
				eq++
			}
			if eq == len(doc) || doc[eq] != '=' || !strings.HasSuffix(strings.ToLower(string(doc[name:eq])), "password") {
				continue
			}
			end := eq + 1
			for end < len(doc) && inParamValue(doc[end]) {
				if doc[end] == '\'' {
					// In a single-quoted YAML string '' is a quote, and ' its end.
					if end+1 == len(doc) || doc[end+1] != '\'' {
						break
					}
					end++
				}
				end++
			}
			if end > eq+1 {
				cut(eq+1, end)
			}
			i = end - 1
		}
	}
	if out == nil {
		return doc
	}
	return append(out, doc[last:]...)
}

// inAuthority reports whether b may appear in a URL's authority (RFC 3986:
// user info and host, percent-encoded or not).
func inAuthority(b byte) bool {
	return isUnreserved(b) || strings.IndexByte("!$&'()*+,;=:%@[]", b) >= 0
}

func inParamName(b byte) bool { return isUnreserved(b) || b == '%' }

// inParamValue reports whether b may appear in a query parameter's value:
// anything a URL's query holds but the separators '&' and '#'.
func inParamValue(b byte) bool {
	return isUnreserved(b) || strings.IndexByte("!$'()*+,;=:%@/?", b) >= 0
}

func isUnreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '.' || b == '_' || b == '~'
}
