package app

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

// TestDisableBeforeTheSharedStateOpens: the token manager starts with the
// first catalog, before the gateway opens its shared state; a refresh
// token refused in between still disables its credential, once the state
// is open (it was dropped, and the credential served on).
func TestDisableBeforeTheSharedStateOpens(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tokens := &credentialTokens{log: log}
	tokens.disable(t.Context(), "cred-oauth", "auth: refused")
	statuses := capacity.NewStatuses(memstore.New(), log)
	tokens.setStatuses(t.Context(), statuses)
	if st := statuses.Credential("cred-oauth"); st.State != "disabled" || st.Reason != "auth: refused" {
		t.Errorf("status once the shared state opened = %+v, want disabled with the refusal's reason", st)
	}
	tokens.disable(t.Context(), "cred-other", "auth: refused too")
	if st := statuses.Credential("cred-other"); st.State != "disabled" {
		t.Errorf("status of a credential disabled after = %+v, want disabled", st)
	}
}
