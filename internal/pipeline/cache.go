package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/respcache"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Caches are the response cache's backends (docs/cache.md).
type Caches struct {
	Memory respcache.Backend // this replica's own
	Redis  respcache.Backend // shared by the replicas; nil without a Redis state backend
}

// CacheHeader tells the caller whether its answer came from the response
// cache: hit, or miss (only on requests the cache could have answered).
const CacheHeader = "X-Sluice-Cache"

// caches are the catalog's cache settings by key and alias (a key's wins);
// nil when the catalog sets none.
type caches struct {
	byKey, byAlias map[string]*config.Cache
}

func (s *Snapshot) compileCaches(c *config.Catalog) {
	r := &caches{byKey: map[string]*config.Cache{}, byAlias: map[string]*config.Cache{}}
	for _, k := range c.Keys {
		if k.Cache != nil {
			r.byKey[k.ID] = k.Cache
		}
	}
	for _, m := range c.Models {
		if m.Cache != nil {
			r.byAlias[m.Alias] = m.Cache
		}
	}
	if len(r.byKey)+len(r.byAlias) > 0 {
		s.cache = r
	}
}

// cacheOf is the cache settings of a's key, else of its alias; nil for none.
func (s *Snapshot) cacheOf(a *admission) *config.Cache {
	if s.cache == nil {
		return nil
	}
	if c := s.cache.byKey[a.key().ID]; c != nil {
		return c
	}
	return s.cache.byAlias[a.model]
}

// cacheUse is a request's use of its response cache.
type cacheUse struct {
	settings *config.Cache
	backend  respcache.Backend
	key      string
	read     bool              // it may be answered from the cache (no Cache-Control: no-cache)
	flight   *respcache.Flight // the flight it leads; nil when it leads none
	hit      *respcache.Entry  // the answer it replayed; nil for none
	capture  *capture          // what its caller is receiving on a miss
}

// Cache results, as the result label of sluice_cache_requests_total says them.
const (
	cacheHit = iota
	cacheMiss
	cacheBypass
)

// cacheable are the protocols whose answers the cache keeps: a turn of a
// model, asked in one call.
func cacheable(req *sluice.Request) bool {
	return slices.Contains(sluice.Generation, req.Protocol) && !req.Compact && !req.CountTokens && !req.Batch
}

// startCache returns the use a request that Serve answers makes of its
// cache, or nil when it has none or may not use it: a request that is not
// deterministic (unless forced), one whose caller says Cache-Control:
// no-store, one whose answer gets masked values restored (its answer is
// its own), and a Responses request that runs in the background. (A redis
// cache always has its backend: validation requires state.backend: redis.)
func (h *Handler) startCache(a *admission, req *sluice.Request, restoring bool) *cacheUse {
	c := a.snap.cacheOf(a)
	if c == nil || h.caches.Memory == nil {
		return nil
	}
	noStore, noCache := cacheControl(req.Header)
	if !cacheable(req) || noStore || restoring || background(req) {
		h.countCache(cacheBypass)
		return nil
	}
	key, deterministic, err := respcache.Key(&respcache.Request{Tenant: a.key().Tenant, Alias: a.model, Protocol: req.Protocol,
		Stream: req.Stream, IncludeUsage: req.IncludeUsage, Variant: req.Header.Get("Anthropic-Beta"), Body: req.Body})
	if err != nil || (!deterministic && !c.Force) {
		h.countCache(cacheBypass)
		return nil
	}
	u := &cacheUse{settings: c, backend: h.caches.Memory, key: key, read: !noCache}
	if c.Backend == config.CacheRedis && h.caches.Redis != nil {
		u.backend = h.caches.Redis
	}
	if noCache {
		h.countCache(cacheBypass)
	}
	return u
}

// background reports a Responses request that runs in the background: its
// answer is a queued response, not the model's.
func background(req *sluice.Request) bool {
	if req.Protocol != sluice.ProtocolOpenAIResponses {
		return false
	}
	start, end, ok, err := jsonfield.Find(req.Body, "background")
	return ok && err == nil && string(req.Body[start:end]) == "true"
}

// cacheControl reads the caller's Cache-Control: no-store (neither read
// nor store) and no-cache (do not answer from the cache; it may store).
func cacheControl(h http.Header) (noStore, noCache bool) {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-store":
				noStore = true
			case "no-cache":
				noCache = true
			}
		}
	}
	return noStore, noCache
}

// lookup returns the stored answer of the request, if any. On a miss the
// request leads the flight of its key, or follows the flight another
// request leads: it waits for that answer and replays it; when the leader
// ends without one, it goes upstream itself.
func (h *Handler) lookup(ctx context.Context, u *cacheUse) *respcache.Entry {
	if !u.read {
		return nil
	}
	e, err := u.backend.Get(ctx, u.key)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "response cache unavailable", slog.String("error", err.Error()))
	}
	if e == nil {
		fl, lead := h.flights.Join(u.key)
		if lead {
			u.flight = fl
		} else {
			e, _ = fl.Wait(ctx) // a caller gone goes on to fail its call as it would have
		}
	}
	if e == nil {
		h.countCache(cacheMiss)
		return nil
	}
	h.countCache(cacheHit)
	u.hit = e
	return e
}

// replay answers the caller with e: its content type and what its
// translation dropped, then its chunks in order, each flushed as the original caller received them (the last by
// the end of the answer: a whole answer goes out in one write).
func replay(w http.ResponseWriter, e *respcache.Entry) {
	hd := w.Header()
	hd.Set("Content-Type", e.ContentType)
	hd.Set(CacheHeader, "hit")
	if e.Dropped != "" {
		hd.Set(upstream.DroppedHeader, e.Dropped)
	}
	if e.DroppedTools != "" {
		hd.Set(upstream.DroppedToolsHeader, e.DroppedTools)
	}
	if !strings.HasPrefix(e.ContentType, "text/event-stream") {
		hd.Set("Content-Length", strconv.Itoa(e.Size()))
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, c := range e.Chunks {
		if _, err := w.Write(c); err != nil {
			return // the caller is gone; the hit is billed as an answer begun
		}
		if i < len(e.Chunks)-1 {
			_ = rc.Flush()
		}
	}
}

// keep stores the answer the caller received on a miss when it may be
// replayed: complete, status 200, measured, within max_entry_bytes; and
// lands the flight the request leads with it (or with none).
func (h *Handler) keep(ctx context.Context, u *cacheUse, r *passage) {
	var e *respcache.Entry
	c := u.capture
	if r.err == nil && c.status == http.StatusOK && !c.over && r.out.Committed && r.out.Usage.Measured {
		hd := c.Header()
		e = &respcache.Entry{ContentType: hd.Get("Content-Type"), Chunks: c.chunks(), Usage: r.out.Usage,
			Dropped: hd.Get(upstream.DroppedHeader), DroppedTools: hd.Get(upstream.DroppedToolsHeader)}
		if n := len(r.out.Executions); n > 0 {
			e.Model = r.out.Executions[n-1].Model
		}
		if err := u.backend.Put(context.WithoutCancel(ctx), u.key, e, u.settings.TTL.D()); err != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "response cache unavailable", slog.String("error", err.Error()))
		} else if h.metrics != nil {
			h.metrics.CacheStoredBytes.Add(float64(e.Size()))
		}
	}
	if u.flight != nil {
		h.flights.Land(u.key, u.flight, e)
	}
}

func (h *Handler) countCache(result int) {
	if h.cacheCounts != nil {
		h.cacheCounts[result].Inc()
	}
}

// hitCharge is what a cache hit replaying e is billed, by the cache's
// charge: the original usage at the price (full), nothing (none), or the
// original usage with every prompt token at the cache-read rate
// (cached_rate). Nil for a key that is not billed. The upstream is paid
// nothing: Cost is 0.
func (c *charging) hitCharge(v *billing.View, req *sluice.Request, e *respcache.Entry, charge string) *sluice.Charge {
	if c == nil {
		return nil
	}
	local := c.local(req)
	defer func() { v.Settle(local) }()
	if c.account == nil {
		return nil
	}
	u := e.Usage
	if charge == config.CacheChargeCachedRate {
		u.CachedTokens, u.CacheWriteTokens = u.PromptTokens, 0
	}
	if charge != config.CacheChargeNone {
		local.Price = c.price.Rates.Charge(u, nil)
	}
	local.Account = c.account.id
	return &sluice.Charge{Account: c.account.id, Plan: c.account.plan, PriceVersion: c.price.Version(), Price: int64(local.Price)}
}

// saved counts what the upstream would have been paid for the answer a
// hit replayed: its model's cost in force when the request arrived.
func (h *Handler) saved(table *billing.Table, req *sluice.Request, e *respcache.Entry) {
	if h.metrics == nil {
		return
	}
	if cost, ok := table.Cost(e.Model, req.Received); ok {
		h.metrics.CacheSaved.WithLabelValues(req.Model).Add(float64(cost.Rates.Charge(e.Usage, nil)))
	}
}

// capture passes an answer on to the caller and keeps a copy of what it
// sent: its status, and its body as the bytes between flushes, so that a
// replay flushes where the original did. Past limit bytes it keeps
// nothing more (over).
type capture struct {
	http.ResponseWriter
	limit  int64
	status int
	size   int64
	over   bool
	done   [][]byte // the flushed chunks
	open   []byte   // written since the last flush
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	if c.size += int64(n); c.size > c.limit {
		c.over, c.done, c.open = true, nil, nil
	}
	if !c.over {
		c.open = append(c.open, b[:n]...)
	}
	return n, err
}

// FlushError ends a chunk and flushes it to the caller.
func (c *capture) FlushError() error {
	c.cut()
	return http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *capture) cut() {
	if len(c.open) > 0 {
		c.done = append(c.done, c.open)
		c.open = nil
	}
}

// chunks is the whole answer, its last bytes unflushed included.
func (c *capture) chunks() [][]byte {
	c.cut()
	return c.done
}
