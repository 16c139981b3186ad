package upstream

import (
	"errors"
	"slices"

	"github.com/sluicehq/sluice"
)

// Untranslatable returns the 400 of a request that no edge of edges can
// carry: each speaks another protocol than req's, and the translator to
// each of those protocols refuses the request (what it asks for cannot be
// expressed there); the first refusal is returned. nil when some edge can
// take it — one that speaks req's protocol ends the check at once, so a
// passthrough costs nothing. It runs, before any claim, the translation an
// attempt would run after one, once per protocol among edges. A count is
// answered without a translator (Execute), so it is never refused here.
func (c *Caller) Untranslatable(req *sluice.Request, edges []*sluice.Edge) error {
	if req.CountTokens {
		return nil
	}
	var refusal error
	var tried []sluice.Protocol
	for _, e := range edges {
		if e.Protocol == req.Protocol {
			return nil
		}
		if slices.Contains(tried, e.Protocol) {
			continue
		}
		tried = append(tried, e.Protocol)
		translator := c.protocols.Translators[Pair{req.Protocol, e.Protocol}]
		if translator == nil {
			return nil // the attempt says so
		}
		_, err := translator().Request(req, e.Model)
		se, ok := errors.AsType[*sluice.Error](err)
		if !ok || se.Code != sluice.CodeInvalidRequest {
			return nil
		}
		if refusal == nil {
			refusal = se
		}
	}
	return refusal
}
