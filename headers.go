package sluice

import (
	"net/http"
	"strings"
)

// HeaderSet is a set of HTTP header names: whole names, and prefixes
// (written with a trailing '*': "x-stainless-*"). Built once (by
// NewHeaderSet) and read only afterwards; the zero HeaderSet is empty.
type HeaderSet struct {
	names    []string // canonical (http.CanonicalHeaderKey)
	prefixes []string // as written, without the '*'; matched ignoring case
}

// NewHeaderSet compiles header name patterns: a name, or a prefix ending
// in '*' ("*" alone: every name). The patterns are expected to be valid
// (config checks the catalog's).
func NewHeaderSet(patterns ...string) HeaderSet {
	var s HeaderSet
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			s.prefixes = append(s.prefixes, prefix)
		} else {
			s.names = append(s.names, http.CanonicalHeaderKey(p))
		}
	}
	return s
}

// Empty reports whether the set has no name and no prefix.
func (s HeaderSet) Empty() bool { return len(s.names) == 0 && len(s.prefixes) == 0 }

// Has reports whether canonical, a header name in canonical form (as
// net/http's server keys a request's header), is in the set. It does not
// allocate.
func (s HeaderSet) Has(canonical string) bool {
	for _, n := range s.names {
		if n == canonical {
			return true
		}
	}
	for _, p := range s.prefixes {
		if len(canonical) >= len(p) && strings.EqualFold(canonical[:len(p)], p) {
			return true
		}
	}
	return false
}

// HeaderRules are an endpoint's changes to which of a caller's headers it
// is sent (the catalog's endpoints[].forward_headers and drop_headers):
// Forward adds to what the caller's protocol passes on, whether or not the
// request is translated, and Drop removes, from both. Neither can pass a
// header NeverForwarded names.
type HeaderRules struct {
	Forward, Drop HeaderSet
}

// neverForwarded are the caller's headers that no upstream is ever sent,
// whatever an endpoint's rules say, by canonical name: what authenticates
// the caller to Sluice (its key, in any protocol's header, and cookies),
// what would override the credential Sluice presents or the account it
// bills (OpenAI's organization and project, Google's billed project), the
// body's framing and what Sluice asks of the answer (it sets them itself),
// and the hop-by-hop headers (RFC 9110 §7.6.1).
var neverForwarded = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "X-Api-Key": true, "X-Goog-Api-Key": true, "Api-Key": true,
	"Cookie": true, "Openai-Organization": true, "Openai-Project": true, "X-Goog-User-Project": true,
	"Host": true, "Content-Length": true, "Content-Type": true, "Content-Encoding": true, "Transfer-Encoding": true,
	"Accept": true, "Accept-Encoding": true, "Expect": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Te": true, "Trailer": true, "Upgrade": true,
}

// neverForwardedPrefixes are the prefixes of names never forwarded:
// Sluice's own request headers (X-Sluice-Priority, …) and AWS's signing
// headers, which Bedrock's SigV4 signature covers.
var neverForwardedPrefixes = [...]string{"X-Sluice-", "X-Amz-"}

// NeverForwarded reports whether a caller's header named canonical (in
// canonical form) must never reach an upstream.
func NeverForwarded(canonical string) bool {
	if neverForwarded[canonical] {
		return true
	}
	for _, p := range neverForwardedPrefixes {
		if len(canonical) >= len(p) && strings.EqualFold(canonical[:len(p)], p) {
			return true
		}
	}
	return false
}

// NeverForwardedPattern reports whether a header name pattern (a name, or
// a prefix ending in '*') names only headers that are never forwarded: a
// never-forwarded name, or a prefix within a never-forwarded prefix
// ("x-sluice-*"). A wider prefix ("x-*") is not: what it covers beyond
// them is forwarded.
func NeverForwardedPattern(pattern string) bool {
	prefix, wildcard := strings.CutSuffix(pattern, "*")
	if !wildcard {
		return NeverForwarded(http.CanonicalHeaderKey(pattern))
	}
	for _, p := range neverForwardedPrefixes {
		if len(prefix) >= len(p) && strings.EqualFold(prefix[:len(p)], p) {
			return true
		}
	}
	return false
}
