package pipeline

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/internal/validate"
)

// validate refuses, before the request takes any capacity, what its
// upstream would refuse anyway (package validate). A request for a model
// the key cannot reach is left to route, which says so.
func (h *Handler) validate(a *admission, req *sluice.Request) error {
	if a.alias == nil || !a.alias.Answers(req.Protocol) {
		return nil
	}
	if ref := validate.Request(req.Protocol, req.Body); ref != nil {
		return h.invalid(req, ref)
	}
	return nil
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
