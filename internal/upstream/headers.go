package upstream

import (
	"net/http"

	"github.com/sluicehq/sluice"
)

// passOn sets on an upstream request's header h the caller's headers
// (caller, read only) that may reach the endpoint: those of pass (what
// the caller's protocol passes on when the upstream speaks it too) or of
// the endpoint's rules.Forward, but none of rules.Drop and none that
// sluice.NeverForwarded names. It runs before the credential is presented,
// so that neither the credential's presentation nor its static headers
// can be overridden. The values are the caller's, shared: the transport
// only reads them. With nothing to pass it costs nothing, and it never
// allocates but to grow h.
func passOn(h, caller http.Header, pass sluice.HeaderSet, rules *sluice.HeaderRules) {
	if pass.Empty() && rules.Forward.Empty() {
		return
	}
	for name, v := range caller {
		if !pass.Has(name) && !rules.Forward.Has(name) || rules.Drop.Has(name) || sluice.NeverForwarded(name) {
			continue
		}
		h[name] = v
	}
}
