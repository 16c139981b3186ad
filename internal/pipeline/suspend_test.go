package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/upstream"
)

// fakeSuspensions suspends the subjects it holds.
type fakeSuspensions map[catalog.SuspensionKind][]string

func (f fakeSuspensions) Suspended(kind catalog.SuspensionKind, id string) (catalog.Suspension, bool) {
	for _, s := range f[kind] {
		if s == id {
			return catalog.Suspension{Kind: kind, ID: id, Reason: "test"}, true
		}
	}
	return catalog.Suspension{}, false
}

// countedClaims counts the Acquires that reach the claims store.
type countedClaims struct {
	*memstore.Store
	acquires atomic.Int64
}

func (c *countedClaims) Acquire(ctx context.Context, a store.Acquire) (store.Grant, error) {
	c.acquires.Add(1)
	return c.Store.Acquire(ctx, a)
}

// TestSuspendedKeysAreRefusedBeforeAnyClaim checks that a key whose
// billing account or tenant is suspended is refused at admission with the
// suspension's code — before its scopes (an alias it may not use still
// answers the suspension), before any claim is asked for, and before
// anything goes upstream — for chat and job submits alike, while a key of
// another tenant is served.
func TestSuspendedKeysAreRefusedBeforeAnyClaim(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	snap := compileCatalog(t, `version: 1
endpoints: [{id: ep, base_url: `+srv.URL+`, protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
keys:
  - {id: web, tenant: web, secret_env: K1}
  - {id: spam, tenant: spam, secret_env: K2}
`, testSecrets)
	keys := map[string]*sluice.Key{}
	for _, k := range snap.StaticKeys {
		keys[k.ID] = k
	}
	// The billing account is read from the key as it authenticated.
	billed := keys["web"].Clone()
	billed.BillingAccount = "acme"

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	claims := &countedClaims{Store: memstore.New()}
	live := &Live{}
	live.Swap(snap)
	h := NewHandler(Stages{
		Live: live, Capacity: capacity.New(claims, claims, "r", time.Minute, log), Statuses: capacity.NewStatuses(claims, log),
		Caller: upstream.New(log, &upstream.Protocols{Dialects: map[sluice.Protocol]*upstream.Dialect{sluice.ProtocolOpenAIChat: upstream.OpenAIChat}, Endings: map[sluice.Protocol]*upstream.Ending{sluice.ProtocolOpenAIChat: upstream.OpenAIEnding}}, func(string) upstream.BreakerSettings { return upstream.BreakerSettings{Failures: 5, Open: time.Minute} }, nil),
		Usage:  &records{}, Log: log,
		Suspensions: fakeSuspensions{catalog.SuspendedTenant: {"spam"}, catalog.SuspendedBillingAccount: {"acme"}},
	})
	request := func(model string) *sluice.Request {
		return &sluice.Request{ID: "r-" + model, Protocol: sluice.ProtocolOpenAIChat, Model: model,
			Body: []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`), Received: time.Now()}
	}
	tests := []struct {
		name  string
		key   *sluice.Key
		model string
		want  sluice.Code
	}{
		{name: "suspended tenant", key: keys["spam"], model: "fast", want: sluice.CodeTenantSuspended},
		{name: "suspended tenant, alias it may not use", key: keys["spam"], model: "missing", want: sluice.CodeTenantSuspended},
		{name: "suspended billing account", key: billed, model: "fast", want: sluice.CodeBillingAccountSuspended},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Serve(t.Context(), httptest.NewRecorder(), request(tt.model), &sluice.Principal{Key: tt.key})
			if se, ok := errors.AsType[*sluice.Error](err); !ok || se.Code != tt.want || se.Code.Status() != 403 {
				t.Errorf("Serve = %v, want 403 %s", err, tt.want)
			}
			_, _, err = h.SubmitJob(t.Context(), request(tt.model), &sluice.Principal{Key: tt.key})
			if se, ok := errors.AsType[*sluice.Error](err); !ok || se.Code != tt.want {
				t.Errorf("SubmitJob = %v, want %s", err, tt.want)
			}
		})
	}
	if n := claims.acquires.Load(); n != 0 {
		t.Errorf("suspended keys asked for %d claims, want none", n)
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("the upstream saw %d requests of suspended keys, want none", n)
	}

	w := httptest.NewRecorder()
	if _, err := h.Serve(t.Context(), w, request("fast"), &sluice.Principal{Key: keys["web"]}); err != nil || w.Code != 200 {
		t.Fatalf("a key of another tenant: Serve = %v, %d; want 200", err, w.Code)
	}
	if claims.acquires.Load() == 0 || len(sim.Requests()) != 1 {
		t.Errorf("a served key: %d claims asked, %d upstream requests; want some and 1", claims.acquires.Load(), len(sim.Requests()))
	}
}

// switchedSuspensions suspends the tenants set in it, changed while
// requests wait.
type switchedSuspensions struct {
	mu      sync.Mutex
	tenants map[string]bool
}

func (s *switchedSuspensions) suspend(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants[tenant] = true
}

func (s *switchedSuspensions) Suspended(kind catalog.SuspensionKind, id string) (catalog.Suspension, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == catalog.SuspendedTenant && s.tenants[id] {
		return catalog.Suspension{Kind: kind, ID: id, Reason: "test"}, true
	}
	return catalog.Suspension{}, false
}

// TestSuspensionStopsWaitingRequests: a request of a tenant suspended
// while it waits for a full credential is refused with the suspension
// when a slot frees, and never goes upstream.
func TestSuspensionStopsWaitingRequests(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	snap := compileCatalog(t, `version: 1
endpoints: [{id: ep, base_url: `+srv.URL+`, protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep], max_inflight: 1}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
keys: [{id: web, tenant: web, secret_env: K1}]
`, testSecrets)
	sim.SetKey("sk-secret-value-UP", simulator.Behavior{Latency: 300 * time.Millisecond})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	claims := &countedClaims{Store: memstore.New()}
	live := &Live{}
	live.Swap(snap)
	suspensions := &switchedSuspensions{tenants: map[string]bool{}}
	h := NewHandler(Stages{
		Live: live, Capacity: capacity.New(claims, claims, "r", time.Minute, log), Statuses: capacity.NewStatuses(claims, log),
		Caller: upstream.New(log, &upstream.Protocols{Dialects: map[sluice.Protocol]*upstream.Dialect{sluice.ProtocolOpenAIChat: upstream.OpenAIChat}, Endings: map[sluice.Protocol]*upstream.Ending{sluice.ProtocolOpenAIChat: upstream.OpenAIEnding}}, func(string) upstream.BreakerSettings { return upstream.BreakerSettings{Failures: 5, Open: time.Minute} }, nil),
		Usage:  &records{}, Log: log, Suspensions: suspensions,
	})
	key := snap.StaticKeys[0]
	serve := func(id string) error {
		req := &sluice.Request{ID: id, Protocol: sluice.ProtocolOpenAIChat, Model: "fast",
			Body: []byte(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`), Received: time.Now()}
		_, err := h.Serve(t.Context(), httptest.NewRecorder(), req, &sluice.Principal{Key: key})
		return err
	}
	var wg sync.WaitGroup
	var first, waiting error
	wg.Go(func() { first = serve("r-first") })
	for deadline := time.Now().Add(2 * time.Second); sim.InFlight() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the upstream")
		}
	}
	wg.Go(func() { waiting = serve("r-waiting") })
	for deadline := time.Now().Add(2 * time.Second); claims.acquires.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second request never asked for a claim")
		}
	}
	suspensions.suspend("web")
	wg.Wait()
	if first != nil {
		t.Errorf("the request served before the suspension = %v, want served", first)
	}
	if se, ok := errors.AsType[*sluice.Error](waiting); !ok || se.Code != sluice.CodeTenantSuspended {
		t.Errorf("the request waiting when its tenant was suspended = %v, want %s", waiting, sluice.CodeTenantSuspended)
	}
	if n := len(sim.Requests()); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1: the waiting one must not go", n)
	}
}
