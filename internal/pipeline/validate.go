package pipeline

import (
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/internal/validate"
)

// validate refuses, before the request takes any capacity, what its
// upstream would refuse anyway (package validate). A request for a model
// the key cannot reach is left to route, which says so. When a deployment
// of the alias takes no images, the same pass finds the request's first
// image part, for route (images); otherwise no one looks for images.
func (h *Handler) validate(a *admission, req *sluice.Request) error {
	if a.alias == nil || !a.alias.Answers(req.Protocol) {
		return nil
	}
	var ref *validate.Refusal
	if a.alias.ScanImages {
		a.image, ref = validate.Scan(req.Protocol, req.Body)
		a.scanned = true
	} else {
		ref = validate.Request(req.Protocol, req.Body)
	}
	if ref != nil {
		return h.invalid(req, ref)
	}
	return nil
}

// images keeps, of all (an alias's edges for the request), those that
// take the request's images: all itself for a request without. A request
// with images none of whose edges takes any is refused, naming its first
// image part (reason image_input), before any claim.
func (h *Handler) images(a *admission, req *sluice.Request, all []*sluice.Edge) ([]*sluice.Edge, error) {
	if !a.scanned && a.alias.ScanImages {
		// A reload while the request waited gave its alias a deployment
		// that takes no images: it is looked at now (it passed validation).
		a.image, _ = validate.Scan(req.Protocol, req.Body)
		a.scanned = true
	}
	if !a.image.Found() {
		return all, nil
	}
	taking := slices.DeleteFunc(all, func(e *sluice.Edge) bool { return !e.Input.Takes(sluice.InputImage) })
	if len(taking) == 0 {
		return nil, h.invalid(req, a.image.Refusal(req.Model))
	}
	return taking, nil
}

// invalid counts ref, a refusal of req, and returns it as the caller's
// 400 invalid_request.
func (h *Handler) invalid(req *sluice.Request, ref *validate.Refusal) error {
	if h.metrics != nil {
		h.metrics.RequestsInvalid.WithLabelValues(string(req.Protocol), ref.Reason).Inc()
	}
	return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: ref.Msg}
}

// translatable refuses, before the request takes any capacity, a request
// that none of its edges can carry: each needs a translator, and each
// translator refuses what the request asks for (upstream.Untranslatable).
// Counted with reason untranslatable. Otherwise it returns the translation
// that found an edge able to carry it, for the first attempt there to send.
func (h *Handler) translatable(req *sluice.Request, edges []*sluice.Edge) (*upstream.Translation, error) {
	t, err := h.caller.Untranslatable(req, edges)
	if err != nil && h.metrics != nil {
		h.metrics.RequestsInvalid.WithLabelValues(string(req.Protocol), validate.ReasonUntranslatable).Inc()
	}
	return t, err
}
