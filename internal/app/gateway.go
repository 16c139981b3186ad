package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ingress"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/oauth"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/respcache"
	"github.com/sluicehq/sluice/internal/settle"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/degraded"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/redisstore"
	"github.com/sluicehq/sluice/internal/store/sqlstore"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Options configure a gateway. Zero values take the catalog's settings.
type Options struct {
	ConfigPath  string // catalog file; empty = last applied catalog, else the demo
	Listen      string
	AdminListen string
	DatabaseURL string
	Log         *slog.Logger
	LookupEnv   func(string) (string, bool)
	Banner      io.Writer     // where the startup banner goes (stdout); nil = nowhere
	ReloadEvery time.Duration // how often the catalog file is checked for changes; default 1s
	// Spans receives the spans of every request, with telemetry's sample,
	// in place of telemetry.otlp's collector (tests); nil = the catalog's.
	Spans sdktrace.SpanProcessor
}

// Gateway is a running Sluice. Close stops it.
type Gateway struct {
	closeOnce sync.Once
	closeErr  error
	log       *slog.Logger
	db        *sqldb.DB
	live      *pipeline.Live
	keys      *authn.Keyring
	caller    *upstream.Caller
	recorder  *settle.Recorder
	view      *billing.View // the balances billed requests are admitted on
	totals    *ledgerTotals // what view reads, closing allowance cycles as it does
	capacity  *capacity.Engine
	statuses  *capacity.Statuses
	closers   []func() error // shared-state clients, closed last
	metrics   *metrics.Metrics
	tracer    *telemetry.Tracer // nil: tracing off
	catalog   *catalogSource
	demo      *demo
	dataPlane *http.Server
	adminAPI  *http.Server
	handlers  *handlers   // the data plane's, counted for the drain
	draining  atomic.Bool // set when the drain begins: GET /readyz answers 503 from then on
	// stopRequests cancels the context of every data-plane request; see drain.
	stopRequests context.CancelCauseFunc
	addr         string
	admin        string
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// Addr is the data plane's listen address.
func (g *Gateway) Addr() string { return g.addr }

// AdminAddr is the admin API's listen address.
func (g *Gateway) AdminAddr() string { return g.admin }

// Live is the snapshot holder, for tests that inspect what is serving.
func (g *Gateway) Live() *pipeline.Live { return g.live }

// Start builds everything and starts serving. It fails when the catalog is
// invalid: at startup there is no last good snapshot to fall back on.
func Start(ctx context.Context, o Options) (_ *Gateway, err error) {
	if o.ReloadEvery == 0 {
		o.ReloadEvery = time.Second
	}
	g := &Gateway{log: o.Log, live: &pipeline.Live{Log: o.Log}, metrics: metrics.New(), handlers: newHandlers()}
	// The background loops (capacity, jobs, refreshes) outlive ctx, which
	// ends at SIGTERM: requests draining still need them. Close stops them.
	run, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancelRun
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	id := replicaID()
	src := &catalogSource{path: o.ConfigPath, lookupEnv: o.LookupEnv, live: g.live, metrics: g.metrics, log: o.Log, replica: id}
	g.catalog = src
	cat, doc, err := src.initial()
	if err != nil {
		return nil, err
	}
	dbURL := o.DatabaseURL
	if dbURL == "" {
		if dbURL, err = cat.Database.LoadURL(o.LookupEnv); err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
	}
	if g.db, err = sqldb.Open(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	docs := sqlcatalog.New(g.db)
	src.docs, src.replicas = docs, docs
	found := o.ConfigPath != ""
	var storedVersion int64 // of the stored catalog serving; 0 = none
	if !found {
		// A catalog applied through the admin API outlives restarts.
		stored, version, err := src.docs.LoadCatalog(ctx)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("load the applied catalog: %w", err)
		default:
			found = true
			if cat, err = config.LoadServing(stored, o.LookupEnv, dialects.CanServe); err != nil {
				return nil, fmt.Errorf("stored catalog: %w", err)
			}
			doc, src.origin, storedVersion = stored, "store", version
		}
	}
	if !found {
		if g.demo, err = startDemo(o.Log); err != nil {
			return nil, err
		}
		cat, doc, src.origin = g.demo.catalog, nil, "demo"
		src.lookupEnv = g.demo.lookupEnv(o.LookupEnv)
	}
	stored := sqlcatalog.New(g.db)
	g.keys = authn.NewKeyring(stored)
	// Suspended billing accounts and tenants are read with the keys, and
	// past server.key_staleness without a successful read, every key is
	// refused rather than judged by an old view.
	g.keys.TrackSuspensions(stored)
	g.keys.FailClosed(func() time.Duration { return g.live.Load().Catalog.Server.KeyStaleness.D() })
	// Keys of the admin API are checked against the catalog serving, and
	// compiled into its snapshot on every change (the keyring refreshes
	// every second), never on the request path.
	g.keys.Follow(func(k *sluice.Key) error { return g.live.Load().CheckKey(k) }, g.live.SetStoredKeys)
	src.keys = g.keys
	if err := g.keys.Refresh(ctx); err != nil {
		return nil, err
	}
	src.tokens = &credentialTokens{db: g.db, dbURL: dbURL, lookupEnv: src.lookupEnv, log: o.Log,
		run: func(m *oauth.Manager) { g.background(run, func(ctx context.Context) { m.Run(ctx, time.Second) }) }}
	if err := src.install(cat, doc, src.origin, storedVersion); err != nil {
		return nil, err
	}
	g.caller = upstream.New(o.Log, dialects, func(id string) upstream.BreakerSettings {
		f, open := g.live.Load().BreakerSettings(id)
		return upstream.BreakerSettings{Failures: f, Open: open}
	}, g.breakerChanged)
	ledger := sqlledger.New(g.db)
	outbox, err := g.eventsOutbox(cat, o.LookupEnv, id)
	if err != nil {
		return nil, err
	}
	if g.recorder, err = settle.NewRecorder(ledger, o.Log, spoolDir(cat.Database.SpoolDir, dbURL), 256, 200*time.Millisecond, outbox...); err != nil {
		return nil, err
	}
	g.totals = newLedgerTotals(ledger, g.live)
	g.view = billing.NewView(g.totals, billingStale)
	g.recorder.GuardWrites(g.view.Write) // the view learns which charges the store has
	g.metrics.WatchUsageSetAside(g.recorder.SetAside)
	g.metrics.WatchUsageBacklog(g.recorder.SpoolBytes, g.recorder.Pending)
	g.metrics.WatchBillingBalances(func(yield func(string, int64)) {
		for account, balance := range g.view.Balances() {
			yield(account, int64(balance))
		}
	})
	shared, jobs, responses, err := g.openState(ctx, cat.State, o.LookupEnv)
	if err != nil {
		return nil, err
	}
	g.capacity = capacity.New(shared, shared, id, cat.State.LeaseTTL.D(), o.Log)
	src.capacity.Store(g.capacity)
	g.statuses = capacity.NewStatuses(shared, o.Log)
	if err := g.statuses.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("read credential statuses: %w", err)
	}
	src.tokens.setStatuses(ctx, g.statuses)
	ents := newEntitlements(sqlstore.NewEntitlements(g.db), g.live, o.Log)
	if err := ents.refresh(ctx); err != nil {
		return nil, fmt.Errorf("read entitlements: %w", err)
	}
	if g.tracer, err = startTracing(ctx, &cat.Telemetry, o, id); err != nil {
		return nil, err
	}
	src.tracing = &cat.Telemetry
	handler := pipeline.NewHandler(pipeline.Stages{
		Live: g.live, Capacity: g.capacity, Statuses: g.statuses, Affinity: shared, Inspector: shared,
		Caller: g.caller, Usage: spendMetered{g.recorder, g.metrics}, Jobs: jobs, Billing: g.view, Metrics: g.metrics, Tracer: g.tracer, Log: o.Log,
		Entitlements: ents.view, Suspensions: g.keys,
		Caches: pipeline.Caches{Memory: respcache.NewMemory(cacheMemoryEntries, cacheMemoryBytes), Redis: responses},
	})

	srv := cat.Server
	listen, adminListen := firstOf(o.Listen, srv.Listen), firstOf(o.AdminListen, srv.AdminListen)
	tokens, generated, err := adminTokens(srv, o.LookupEnv)
	if err != nil {
		return nil, err
	}
	dataLn, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", adminListen)
	if err != nil {
		dataLn.Close()
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	g.addr, g.admin = dataLn.Addr().String(), adminLn.Addr().String()
	// Requests get a context of their own, not ctx: they run on after
	// SIGTERM, for the shutdown grace.
	requests, stopRequests := context.WithCancelCause(context.Background())
	g.stopRequests = stopRequests
	g.dataPlane = g.serve(dataLn, g.handlers.track(ingress.New(handler, g.live, g.keys, g.metrics, o.Log, fronts)), requests)
	pl := &pool{live: g.live, inspector: shared, statuses: g.statuses}
	g.metrics.Registry.MustRegister(newPoolCollector(pl, o.Log))
	g.adminAPI = g.serve(adminLn, admin.New(admin.Options{
		Tokens: tokens, Audit: sqlcatalog.New(g.db), Keys: g.keys, Usage: ledger, Catalog: src, Pool: pl, Jobs: jobs, Log: o.Log,
		Billing:  adminBilling{ledger, g},
		Affinity: affinityBindings{g.live, shared},
		Metrics:  promhttp.HandlerFor(g.metrics.Registry, promhttp.HandlerOpts{}),
		Ready:    func() bool { return !g.draining.Load() },
		// Entitlements changed through any replica reach every replica's
		// view within entitlementPoll.
		Entitlements: ents,
		QueueWaits:   g.metrics.QueueWaitQuantiles,
	}), context.Background())
	g.background(run, func(ctx context.Context) {
		if err := g.capacity.Run(ctx); err != nil {
			o.Log.LogAttrs(ctx, slog.LevelError, "capacity engine stopped", slog.Any("err", err))
		}
	})
	g.background(run, func(ctx context.Context) { _ = handler.RunJobPoller(ctx) })
	g.startBilling(ctx, run)
	g.startHistory(run, &history{db: g.db, usage: ledger, audit: sqlcatalog.New(g.db), log: o.Log,
		retention: func() config.Retention { return g.live.Load().Catalog.Database.Retention }})
	// Statuses changed on another replica are seen here within a second.
	g.background(run, func(ctx context.Context) { g.statuses.Run(ctx, 500*time.Millisecond) })
	g.background(run, ents.run)
	keyRefreshFailed := g.metrics.WatchKeyStore(g.keys.RefreshedAt)
	g.background(run, func(ctx context.Context) {
		g.keys.Run(ctx, time.Second, func(err error) {
			keyRefreshFailed.Inc()
			o.Log.LogAttrs(ctx, slog.LevelWarn, "key refresh failed", slog.Any("err", err),
				slog.Duration("key_store_age", time.Since(g.keys.RefreshedAt()).Round(time.Second)))
		})
	})
	if o.ConfigPath != "" {
		g.background(run, func(ctx context.Context) { src.watch(ctx, o.ReloadEvery) })
	} else {
		// Versions stored through any replica on the database serve here
		// within catalogPoll; a catalog file wins over the store.
		g.background(run, src.follow)
	}
	g.background(run, src.heartbeat)
	g.banner(o.Banner, generated)
	return g, nil
}

// serve serves h on ln in the background; each request's context derives
// from base.
func (g *Gateway) serve(ln net.Listener, h http.Handler, base context.Context) *http.Server {
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return base }}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.LogAttrs(context.Background(), slog.LevelError, "server stopped", slog.Any("err", err))
		}
	}()
	return s
}

func (g *Gateway) background(ctx context.Context, f func(context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(ctx)
	}()
}

// Close stops accepting requests, lets running ones finish within
// server.shutdown_grace and cuts those still running then (see drain);
// once every request has settled it flushes usage records and closes the
// stores. It returns an error only if something was lost or failed to
// close. Later calls return the first one's result.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() { g.closeErr = g.close() })
	return g.closeErr
}

func (g *Gateway) close() error {
	errs := []error{g.drain()}
	// Every request has settled. Releases still on their way to the shared
	// store are sent now, before its client closes (bounded: a lease not
	// released lapses after its TTL). The background loops stop only now:
	// draining requests need the capacity engine.
	if g.capacity != nil {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.capacity.Flush(fctx); err != nil {
			g.log.LogAttrs(fctx, slog.LevelWarn, "claim releases not sent at shutdown; their leases lapse", slog.Any("err", err))
		}
		cancel()
	}
	g.closeTracing() // every span has ended
	g.cancel()
	g.wg.Wait()
	if g.recorder != nil {
		g.recorder.Close()
	}
	if g.caller != nil {
		g.caller.Close()
	}
	if g.demo != nil {
		g.demo.close()
	}
	if g.db != nil {
		errs = append(errs, g.db.Close())
	}
	for _, c := range g.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

func (g *Gateway) banner(w io.Writer, generatedToken string) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "sluice %s\n  data plane  http://%s/v1\n  admin       http://%s (metrics at /metrics)\n  console     http://%s/console/ (sign in with an admin token)\n",
		version(), g.addr, g.admin, g.admin)
	if generatedToken != "" {
		fmt.Fprintf(w, "  admin token %s (generated; set SLUICE_ADMIN_TOKEN to choose one)\n", generatedToken)
	}
	if g.demo != nil {
		g.demo.banner(w, g.addr)
	}
}

// breakerChanged shares an endpoint breaker's opening and closing with every
// replica (through the status store) and exports it as a metric.
func (g *Gateway) breakerChanged(ob upstream.Observation) {
	g.metrics.BreakerState.WithLabelValues(ob.EndpointID).Set(float64(ob.State))
	st := store.Status{State: sluice.UpstreamActive}
	switch ob.State {
	case breaker.Open:
		st = store.Status{State: sluice.UpstreamOpen, Reason: "endpoint breaker opened"}
	case breaker.HalfOpen:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.statuses.Set(ctx, capacity.KindEndpoint, ob.EndpointID, st); err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "sharing a breaker change failed", slog.String("endpoint_id", ob.EndpointID), slog.Any("err", err))
	}
}

// sharedState is everything the capacity engine keeps in the shared store,
// and the session-affinity bindings.
type sharedState interface {
	store.Claims
	store.Waker
	store.Inspector
	store.Statuses
	store.Affinity
}

// openState opens the configured shared-state backend and the job bindings:
// for one process, memory and the database (so that a restart can still
// follow its jobs); for replicas that share accounts, Redis for both, and
// for the response cache's shared backend (nil without Redis).
func (g *Gateway) openState(ctx context.Context, st config.State, lookupEnv func(string) (string, bool)) (sharedState, store.Jobs, respcache.Backend, error) {
	if st.Backend != "redis" {
		return memstore.New(), sqlstore.New(g.db), nil, nil
	}
	u, err := st.Redis.LoadURL(lookupEnv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("state.redis: %w", err)
	}
	client, err := redisClient(u, st.Redis.Cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, nil, nil, fmt.Errorf("connect to redis: %w", err)
	}
	prefix := st.Redis.Prefix
	if prefix == "" {
		prefix = "sluice:"
	}
	s := redisstore.New(client, prefix)
	// Loaded now, the first decisions cost one round trip each, and a
	// Redis without Functions (before 7.0) is refused here, not on the
	// first request.
	if err := s.Load(pctx); err != nil {
		client.Close()
		return nil, nil, nil, fmt.Errorf("load the capacity functions into redis (Redis 7 or later is needed): %w", err)
	}
	if n, err := s.MigrateJobs(pctx); err != nil {
		client.Close()
		return nil, nil, nil, fmt.Errorf("move job bindings to their shards: %w", err)
	} else if n > 0 {
		g.log.LogAttrs(ctx, slog.LevelInfo, "moved job bindings to their shards", slog.Int("jobs", n))
	}
	g.closers = append(g.closers, s.Close, client.Close)
	if st.Degraded != config.DegradedLocal {
		return s, s, s.Responses(), nil // fail closed: 503 state_unavailable while Redis is unreachable
	}
	ds := degraded.New(s, memstore.New(), degraded.Options{
		Replicas: st.Replicas, Ping: func(ctx context.Context) error { return client.Ping(ctx).Err() },
		Log: g.log, Changed: g.degradedMetrics(),
	})
	g.closers = append(g.closers, ds.Close)
	return ds, s, s.Responses(), nil // job bindings stay on Redis: a job is followed only where it is shared
}

// The memory backend's bounds, on each replica: entries and answer bytes
// (the least recently used go first).
const (
	cacheMemoryEntries = 10_000
	cacheMemoryBytes   = 256 << 20
)

// degradedMetrics registers the metrics of state.degraded: local and
// returns what updates them at each transition.
func (g *Gateway) degradedMetrics() func(bool) {
	on := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_state_degraded", Help: "1 while this replica admits against local limits because Redis is unreachable (state.degraded: local).",
	})
	entered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_state_degraded_total", Help: "Times this replica turned to local limits because Redis was unreachable.",
	})
	g.metrics.Registry.MustRegister(on, entered)
	return func(degraded bool) {
		if degraded {
			on.Set(1)
			entered.Inc()
		} else {
			on.Set(0)
		}
	}
}

// redisClient is the client of state.redis: a cluster client when cluster
// is set, with more seed nodes as addr= parameters of the URL.
func redisClient(u string, cluster bool) (redis.UniversalClient, error) {
	if cluster {
		opts, err := redis.ParseClusterURL(u)
		if err != nil {
			return nil, errors.New("state.redis: not a valid redis cluster URL") // the URL may hold a password
		}
		// Without it go-redis ignores our contexts' deadlines and a frozen
		// Redis holds each call for its own read timeout, retries included.
		opts.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return nil, errors.New("state.redis: not a valid redis URL")
	}
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), nil
}

// replicaID names this process among the replicas sharing a store.
func replicaID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// adminTokens are the admin API's tokens: server.admin_tokens, and the
// write token "admin" from server.admin_token_env. With neither set, that
// token is $SLUICE_ADMIN_TOKEN, or one made up that the banner shows once
// (generated is then its secret).
func adminTokens(srv config.Server, lookupEnv func(string) (string, bool)) (tokens []admin.Token, generated string, err error) {
	for _, t := range srv.AdminTokens {
		secret, err := t.Secret(lookupEnv)
		if err != nil {
			return nil, "", err
		}
		tokens = append(tokens, admin.Token{ID: t.ID, Secret: secret, Role: admin.Role(t.Role)})
	}
	if srv.AdminTokenEnv == "" && len(tokens) > 0 {
		return tokens, "", nil
	}
	secret, made := adminToken(srv.AdminTokenEnv, lookupEnv)
	if made {
		generated = secret
	}
	return append(tokens, admin.Token{ID: config.AdminTokenEnvID, Secret: secret, Role: admin.RoleWrite}), generated, nil
}

// adminToken reads the admin token from the environment, or makes one up.
func adminToken(envName string, lookupEnv func(string) (string, bool)) (token string, generated bool) {
	if envName == "" {
		envName = "SLUICE_ADMIN_TOKEN"
	}
	if v, ok := lookupEnv(envName); ok && v != "" {
		return v, false
	}
	var b [24]byte
	rand.Read(b[:])
	return "sluice-admin-" + hex.EncodeToString(b[:]), true
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hangups delivers SIGHUP to the catalog watcher until ctx ends.
func hangups(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		<-ctx.Done()
		signal.Stop(ch)
	}()
	return ch
}
