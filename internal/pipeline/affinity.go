package pipeline

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/routing"
	"github.com/sluicehq/sluice/internal/store"
)

// affinity is session affinity for one request (strategy affinity, see
// routing.Affinity): the seed naming its conversation, the account the seed
// is bound to, and whether the request still waits for that account alone.
//
// It reuses the preferred route policy's mechanism in call: while it
// holds, plan offers the bound ("sticky") account's edges only, and call
// waits for them until the class's affinity wait; then, or at once when
// the account is cooling, out of service or failed, it leaves them with a
// reason and the request takes the allowed account with the most free
// room. The account the request is granted becomes the seed's binding (a
// move), which never bounces back: the new account holds the longer
// prefix now. A nil *affinity is a request without affinity; every method
// accepts it.
type affinity struct {
	settings *routing.Affinity
	alias    string
	seed     string
	owner    store.SeedOwner // the request's key: the bindings it makes are its
	bound    string          // the account the seed is bound to; "" = none
	until    time.Time       // when the request stops waiting for bound
	holding  bool            // plan offers bound's edges only
	moved    string          // why the request left bound ("" while it has not)
	ordered  bool            // the edges are in affinity's order
	placed   string          // the placement, counted at the first grant (sluice.Placement*); "" before it
}

// holds reports whether the request still waits for its bound account.
func (a *affinity) holds() bool { return a != nil && a.holding }

// sticky reports whether e is an edge of the bound account.
func (a *affinity) sticky(e *sluice.Edge) bool {
	return a != nil && a.bound != "" && e.Account.ID == a.bound
}

// leave stops the wait for the bound account, for reason.
func (a *affinity) leave(reason string) {
	if a == nil || a.bound == "" || a.moved != "" {
		return
	}
	a.holding, a.moved, a.ordered = false, reason, false
}

// affinityOf returns the affinity settings that order the requests of a
// key with route policy rp on alias: its pool's strategy when the policy
// routes through a pool, else the alias's; nil when that is not affinity.
func (s *Snapshot) affinityOf(rp *routePolicy, alias string) *routing.Affinity {
	if rp.strategy != nil {
		a, _ := rp.strategy.(*routing.Affinity)
		return a
	}
	return s.Routes.Affinity(alias)
}

// startAffinity returns the affinity of a request whose alias (or pool)
// has strategy affinity and that names a conversation; nil for every other
// request, which then costs nothing more. A request pinned to a stored
// response (previous_response_id) has a hard binding instead, and a
// count_tokens request runs nothing worth caching. The seed's binding is
// read and refreshed here; a store that cannot answer costs the request
// its binding, never the request.
func (h *Handler) startAffinity(ctx context.Context, adm *admission, req *sluice.Request, pin *store.Job) *affinity {
	if pin != nil || req.CountTokens || h.affinity == nil {
		return nil
	}
	snap, key, class := adm.snap, adm.key(), adm.class
	st := snap.affinityOf(adm.policy, req.Model)
	if st == nil {
		return nil
	}
	seed := routing.Seed(key.Tenant, req)
	if seed == "" {
		return nil
	}
	a := &affinity{settings: st, alias: req.Model, seed: seed, owner: store.SeedOwner{Tenant: key.Tenant, Key: key.ID}}
	bound, err := h.affinity.Touch(ctx, snap.AffinityDomain, a.owner, seed, st.TTL)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "reading a session-affinity binding failed; placed as new", slog.String("request_id", req.ID), slog.Any("err", err))
	}
	if bound != "" {
		a.bound, a.holding = bound, true
		a.until = time.Now().Add(st.Wait[class])
	}
	return a
}

// order puts edges in affinity's order, before plan looks at them: the
// bound account's first while the request holds to it (it leaves at once
// when none of them may be used now); after a move, or for a new seed,
// the rest by free room (see routing.Place). Edges the route policy ranks
// first stay first: a key's preferred accounts beat a binding outside
// them, which then moves (reason "policy").
func (h *Handler) order(ctx context.Context, snap *Snapshot, req *sluice.Request, rp *routePolicy, a *affinity, edges []*sluice.Edge, failed []failure) {
	if a == nil {
		return
	}
	if a.holding && !a.ordered {
		routing.Place(edges, rp.rank, a.bound, nil)
		switch {
		case !slices.ContainsFunc(edges, a.sticky):
			a.leave(h.boundGone(snap, req, rp, a.bound))
		case !a.sticky(edges[0]):
			a.leave("policy")
		default:
			a.ordered = true
		}
	}
	if a.holding {
		// The bound account cannot take the request now: leave at once.
		why := ""
		for _, e := range edges {
			if !a.sticky(e) {
				break
			}
			if why = h.unusable(snap, e, failed); why == "" {
				return
			}
		}
		a.leave(why)
	}
	if !a.ordered {
		h.placeByRoom(ctx, snap, rp, a, edges)
		a.ordered = true
	}
}

// boundGone says why a seed's bound account has no edge among the
// request's: out of service (disabled, breaker_open) or no longer one the
// key may use, or serving the alias (disabled).
func (h *Handler) boundGone(snap *Snapshot, req *sluice.Request, rp *routePolicy, account string) string {
	return h.accountsOutOfService(snap, req, rp, func(id string) bool { return id == account && rp.allows(id) })
}

// placeByRoom orders edges by the free room of their capacity units in the
// capacity store (cap, or the learned hidden cap, less the slots in flight
// and the requests waiting for them; a cooling unit has none), the view
// every replica shares. One read of the store, for new seeds and moves
// only; should it fail, the order is random.
func (h *Handler) placeByRoom(ctx context.Context, snap *Snapshot, rp *routePolicy, a *affinity, edges []*sluice.Edge) {
	ids := make([]string, 0, len(edges))
	for _, e := range edges {
		if id := snap.Candidate(e).Unit.ID; !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	states, err := h.inspector.Units(ctx, snap.AliasDomain(a.alias), ids)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "reading free room for session affinity failed; placed at random", slog.Any("err", err))
	}
	room := make(map[string]int, len(ids))
	now := time.Now()
	for _, e := range edges {
		u := snap.Candidate(e).Unit
		if i := slices.Index(ids, u.ID); i < len(states) {
			room[u.ID] = freeRoom(u.Cap, states[i], now)
		}
	}
	sticky := ""
	if a.moved == "" {
		sticky = a.bound
	}
	routing.Place(edges, rp.rank, sticky, func(e *sluice.Edge) int { return room[snap.Candidate(e).Unit.ID] })
}

// freeRoom is the slots of a unit with capacity slots (the catalog's cap;
// 0 = no cap) a new request could take: that cap (the learned hidden one
// when lower), less those in flight and the requests waiting; a unit
// without a cap has all it needs, less its load; a cooling unit none.
func freeRoom(capacity int, st store.UnitState, now time.Time) int {
	if st.CoolingUntil.After(now) {
		return math.MinInt32
	}
	if st.EffectiveCap > 0 && (capacity == 0 || st.EffectiveCap < capacity) {
		capacity = st.EffectiveCap
	}
	if capacity == 0 {
		capacity = math.MaxInt32
	}
	return capacity - st.InFlight - st.Waiting
}

// affinityGranted records that the request was granted a slot on e: the seed is
// bound there (a move, when it was bound elsewhere), and the placement
// counted once per request.
func (h *Handler) affinityGranted(ctx context.Context, snap *Snapshot, req *sluice.Request, a *affinity, e *sluice.Edge) {
	if a == nil {
		return
	}
	account := e.Account.ID
	if a.placed == "" {
		a.placed = sluice.PlacementHit
		switch {
		case a.bound == "":
			a.placed = sluice.PlacementNew
		case account != a.bound:
			a.placed = sluice.PlacementMoved
		}
		h.metrics.Affinity.Placements.WithLabelValues(a.alias, a.placed).Inc()
	}
	if account == a.bound {
		return // Touch refreshed it
	}
	if a.bound != "" {
		h.metrics.Affinity.Moves.WithLabelValues(a.alias, cmp.Or(a.moved, "no_room")).Inc()
	}
	now, err := h.affinity.Bind(ctx, snap.AffinityDomain, a.owner, a.seed, a.bound, account, a.settings.TTL)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "binding a session-affinity seed failed", slog.String("request_id", req.ID), slog.Any("err", err))
		return
	}
	a.bound, a.moved = now, ""
}

// placement is the request's placement for its usage record; "" for a
// request without affinity or never granted a slot.
func (a *affinity) placement() string {
	if a == nil {
		return ""
	}
	return a.placed
}

// failedOn notes that attempt a on e failed: a failure of the bound
// account moves the seed at once.
func (a *affinity) failedOn(e *sluice.Edge, why string) {
	if a.sticky(e) {
		a.leave(why)
	}
}

// countCached adds the input tokens each execution of a request read from
// the upstream's prompt cache to its account's and alias's total.
func (h *Handler) countCached(req *sluice.Request, execs []sluice.Execution) {
	for i := range execs {
		if n := execs[i].Usage.CachedTokens; n > 0 {
			h.metrics.Affinity.CachedTokens.WithLabelValues(execs[i].AccountID, req.Model).Add(float64(n))
		}
	}
}

// strategyOf compiles the strategy the catalog calls name, with the
// affinity block that goes with it.
func strategyOf(name string, a config.Affinity) (routing.Strategy, error) {
	if name != "affinity" {
		return strategy(name)
	}
	fallback, err := strategy(a.FallbackStrategy)
	if err != nil {
		return nil, err
	}
	st := &routing.Affinity{Fallback: fallback, TTL: cmp.Or(a.TTL, config.DefaultAffinityTTL).D()}
	for c := range st.Wait {
		st.Wait[c] = a.WaitFor(c)
	}
	return st, nil
}

// rerouted notes that the request's edges were routed again (a reload):
// they are put in affinity's order before the next plan.
func (a *affinity) rerouted() {
	if a != nil {
		a.ordered = false
	}
}
