package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/routing"
	"github.com/sluicehq/sluice/internal/store"
)

// Affinity reads session-affinity bindings in the serving catalog's
// capacity domain. Implementations must be safe for concurrent use.
type Affinity interface {
	// Binding returns seed's binding without using it; ok is false when
	// there is none.
	Binding(ctx context.Context, seed string) (b store.Binding, ok bool, err error)
}

// AffinityBinding answers GET /admin/affinity: the binding of a seed. The
// seed is a hash: neither the session nor the conversation is stored.
type AffinityBinding struct {
	Seed      string    `json:"seed"`
	Account   string    `json:"account"`
	ExpiresAt time.Time `json:"expires_at"` // unless a request of the seed uses it again before
}

// affinityBinding handles GET /admin/affinity?session=&alias=&tenant= (the
// binding of the session a caller names in a session header,
// prompt_cache_key or metadata.user_id, for keys of tenant on alias,
// hashed as the gateway hashes it) or ?seed= (a seed's hash).
func (s *server) affinityBinding(w http.ResponseWriter, r *http.Request) error {
	if s.affinity == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no session-affinity bindings")
	}
	q := r.URL.Query()
	seed := q.Get("seed")
	switch {
	case seed != "" && q.Has("session"):
		return invalid("give session (with alias and tenant) or seed, not both")
	case seed == "" && (q.Get("session") == "" || q.Get("alias") == ""):
		return invalid("session and alias are required (tenant: the tenant of the caller's key, \"\" when it has none), or seed")
	case seed == "":
		seed = routing.SessionSeed(q.Get("tenant"), q.Get("alias"), q.Get("session"))
	}
	b, ok, err := s.affinity.Binding(r.Context(), seed)
	if err != nil {
		return err
	}
	if !ok {
		return sluice.Errorf(sluice.CodeNotFound, "no binding for seed "+seed+" (never used, or idle past its ttl)")
	}
	writeJSON(w, http.StatusOK, AffinityBinding{Seed: seed, Account: b.Account, ExpiresAt: s.now().Add(b.TTL).UTC().Truncate(time.Millisecond)})
	return nil
}
