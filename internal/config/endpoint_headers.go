package config

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// headerPatterns checks a list of header name patterns (endpoints[].
// forward_headers, drop_headers) at path at: each a header name, or a
// prefix ending in '*', and none only of headers Sluice never forwards
// (listing one would be a setting that does nothing, or a leak if it did).
func (v *validator) headerPatterns(at string, patterns []string) {
	for j, p := range patterns {
		path := fmt.Sprintf("%s[%d]", at, j)
		switch name, _ := strings.CutSuffix(p, "*"); {
		case p == "*":
		case !validHeaderName(name) || strings.Contains(name, "*"):
			v.addf(path, "%q is not a header name (a trailing * makes it a prefix: x-stainless-*)", p)
		case sluice.NeverForwardedPattern(p):
			v.addf(path, "%s is never forwarded: the caller's credentials to Sluice, Sluice's own X-Sluice-* headers, hop-by-hop headers and those that would override the upstream credential, its account or the request's framing never reach an upstream", p)
		}
	}
}
