package upstream

import (
	"errors"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// Untranslatable returns the 400 of a request that no edge of edges can
// carry: each speaks another protocol than req's, and the translator to
// each of those protocols refuses the request (what it asks for cannot be
// expressed there, or drops hints of a caller that asked for strict
// translation); the first refusal is returned. Otherwise the error is
// nil — one edge that speaks req's protocol ends the check at once, so a
// passthrough costs nothing — and the translation that showed some edge
// can carry req is returned (nil for none), for the first attempt on an
// edge it fits to send instead of translating again (Hooks.Translated). It
// runs, before any claim, the translation an attempt would run after one,
// once per protocol among edges. A count is answered without a translator
// (Execute), so it is never refused here. req's body must not change
// afterwards.
func (c *Caller) Untranslatable(req *sluice.Request, edges []*sluice.Edge) (*Translation, error) {
	if req.CountTokens {
		return nil, nil
	}
	var refusal error
	var tried []sluice.Protocol
	for _, e := range edges {
		if e.Protocol == req.Protocol {
			return nil, nil
		}
		if slices.Contains(tried, e.Protocol) {
			continue
		}
		tried = append(tried, e.Protocol)
		translator := c.protocols.Translators[Pair{req.Protocol, e.Protocol}]
		if translator == nil {
			return nil, nil // the attempt says so
		}
		tr := translator()
		body, err := translate(tr, req, e)
		if err == nil {
			return &Translation{protocol: e.Protocol, model: e.Model, tr: tr, body: body}, nil
		}
		se, ok := errors.AsType[*sluice.Error](err)
		if !ok || se.Code != sluice.CodeInvalidRequest {
			return nil, nil
		}
		if refusal == nil {
			refusal = se
		}
	}
	return nil, refusal
}

// Translation is a request translated for one upstream protocol and model:
// the translator, which keeps what the attempt's answer needs (tool names,
// what was dropped), and the body it made. One attempt uses it.
type Translation struct {
	protocol sluice.Protocol
	model    string
	tr       adapter.Translator
	body     []byte
}

// take returns t's translator and body for an attempt on e, once, when t
// was made for e's protocol and model; ok is false otherwise (also on a
// nil t), and the attempt translates for itself.
func (t *Translation) take(e *sluice.Edge) (tr adapter.Translator, body []byte, ok bool) {
	if t == nil || t.tr == nil || t.protocol != e.Protocol || t.model != e.Model {
		return nil, nil, false
	}
	tr, body = t.tr, t.body
	t.tr, t.body = nil, nil
	return tr, body, true
}
