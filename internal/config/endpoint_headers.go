package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// endpointHeaders checks an endpoint's forward_headers and drop_headers.
// They change the model requests the endpoint is sent: on an endpoint
// that only runs jobs (videos, fal), whose requests carry no caller's
// header, they would do nothing.
func (v *validator) endpointHeaders(at string, e *Endpoint) {
	v.headerPatterns(at+".forward_headers", e.ForwardHeaders)
	v.headerPatterns(at+".drop_headers", e.DropHeaders)
	jobsOnly := len(e.Protocols) > 0 && !slices.ContainsFunc(e.Protocols, func(p string) bool {
		return p != string(sluice.ProtocolOpenAIVideos) && p != string(sluice.ProtocolFalQueue)
	})
	if jobsOnly && len(e.ForwardHeaders)+len(e.DropHeaders) > 0 {
		v.addf(at, "forward_headers and drop_headers change model requests; the job requests of %v send no caller's header", e.Protocols)
	}
}

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
