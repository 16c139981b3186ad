package pipeline

import (
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/store/sqlstore"
	"github.com/sluicehq/sluice/internal/upstream"
)

// attemptsCatalog has two accounts on one endpoint and a key of each
// route policy mode that binds accounts.
const attemptsCatalog = `version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
accounts: [{id: a1, max_inflight: 2}, {id: a2, max_inflight: 2}]
credentials: [{id: c1, account: a1, secret_env: UP, endpoints: [ep]}, {id: c2, account: a2, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
task_types: [{id: chat}, {id: bulk, priority: {default: background}}]
keys:
  - {id: plain, tenant: t, secret_env: K1, tasks: [bulk]}
  - {id: pref, tenant: t, secret_env: K2, policy: {mode: preferred, accounts: [a1], fallback: any, wait: 1s}}
  - {id: strict, tenant: t, secret_env: K3, policy: {mode: strict, accounts: [a1]}}
`

// attemptsRig is a Handler over attemptsCatalog with nothing upstream:
// the transitions of attempts are driven by hand.
type attemptsRig struct {
	h    *Handler
	live *Live
	keys map[string]*sluice.Key
}

func newAttemptsRig(t *testing.T) *attemptsRig {
	t.Helper()
	snap := compileCatalog(t, attemptsCatalog, testSecrets)
	live := &Live{}
	live.Swap(snap)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := memstore.New()
	h := NewHandler(Stages{Live: live, Capacity: capacity.New(mem, mem, "r", time.Minute, log), Statuses: capacity.NewStatuses(mem, log),
		Metrics: metrics.New(), Log: log, Usage: &records{}})
	r := &attemptsRig{h: h, live: live, keys: map[string]*sluice.Key{}}
	for _, k := range snap.StaticKeys {
		r.keys[k.ID] = k
	}
	return r
}

// start admits and routes a chat request of key id, and returns its
// attempts as call would start them.
func (r *attemptsRig) start(t *testing.T, id string, req *sluice.Request) *attempts {
	t.Helper()
	if req == nil {
		req = &sluice.Request{}
	}
	req.ID, req.Protocol, req.Model, req.Received = "req-"+id, sluice.ProtocolOpenAIChat, "fast", time.Now()
	if req.Body == nil {
		req.Body = []byte(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
	}
	p := &passage{}
	r.h.begin(t.Context(), p, req, &sluice.Principal{Key: r.keys[id]})
	if p.err != nil {
		t.Fatalf("begin(%s) = %v", id, p.err)
	}
	p.attempts.start(&p.adm, time.Now())
	return &p.attempts
}

// accounts are the accounts of the edges the last plan offered.
func (at *attempts) accounts() []string {
	var out []string
	for _, e := range at.current {
		out = append(out, e.Account.ID)
	}
	return out
}

// TestAttemptsPlanWidensAPreferredRequest: a preferred request is offered
// its bound account alone until it widens (its wait for them passed, or
// they failed), then the fallback's as well, bound first; a strict one
// never more than its bound account.
func TestAttemptsPlanWidensAPreferredRequest(t *testing.T) {
	r := newAttemptsRig(t)
	at := r.start(t, "pref", nil)
	if _, cands := at.plan(); len(cands) != 1 || !slices.Equal(at.accounts(), []string{"a1"}) {
		t.Fatalf("preferred plan = %v, want [a1]", at.accounts())
	}
	_, until, _ := at.ticket()
	if !until.Equal(at.preferUntil) {
		t.Errorf("a preferred ticket waits until %v, want its policy's wait %v", until, at.preferUntil)
	}
	timeout := &sluice.Error{Code: sluice.CodeCapacityWaitTimeout, Err: capacity.ErrCooling}
	if err := at.waitFailed(timeout, false, until); err != nil || at.widened != "cooling" {
		t.Fatalf("waitFailed(bound cooling) = %v, widened %q; want nil, cooling", err, at.widened)
	}
	if at.plan(); !slices.Equal(at.accounts(), []string{"a1", "a2"}) {
		t.Errorf("widened plan = %v, want [a1 a2]", at.accounts())
	}
	if _, until, _ := at.ticket(); !until.Equal(at.deadline) {
		t.Errorf("a widened ticket waits until %v, want the class's deadline %v", until, at.deadline)
	}
	strict := r.start(t, "strict", nil)
	strict.widened = "cooling" // a strict request has no fallback, whatever it is told
	if strict.plan(); !slices.Equal(strict.accounts(), []string{"a1"}) {
		t.Errorf("strict plan = %v, want [a1]", strict.accounts())
	}
}

// TestAttemptsRanAndFailedOn: an answer or a final or non-retryable
// failure ends the request; a retryable failure rules out what its class
// says (not a rate limit: the store cools the unit) and makes a preferred
// request fall back, saying why.
func TestAttemptsRanAndFailedOn(t *testing.T) {
	r := newAttemptsRig(t)
	at := r.start(t, "pref", nil)
	at.plan()
	e := at.current[0]
	at.grant(e)
	failedAttempt := func(c upstream.Class) upstream.Attempt {
		return upstream.Attempt{Class: c, Err: errors.New("upstream failed"), Exec: sluice.Execution{AccountID: e.Account.ID, EdgeID: e.ID}}
	}

	if done, err := at.ran(e, failedAttempt(upstream.ClassRate), false); done || err != nil {
		t.Fatalf("ran(rate limit) = %v, %v; want not done", done, err)
	}
	at.failedOn(e, failedAttempt(upstream.ClassRate))
	if len(at.failed) != 0 || at.widened != "cooling" {
		t.Errorf("after a rate limit: failed %v, widened %q; want none ruled out, widened cooling", at.failed, at.widened)
	}

	at.widened = ""
	at.failedOn(e, failedAttempt(upstream.ClassAuth))
	if _, ok := ruledOut(at.failed, e); !ok || at.widened != "failed:auth" {
		t.Errorf("after an auth failure: ruled out %v, widened %q; want the credential ruled out, failed:auth", ok, at.widened)
	}
	if at.plan(); slices.Contains(at.accounts(), "a1") {
		t.Errorf("plan after a1's credential failed auth = %v, want a1 left out", at.accounts())
	}

	if done, err := at.ran(e, failedAttempt(upstream.ClassEndpoint), true); !done || err == nil {
		t.Errorf("ran(final) = %v, %v; want done with the failure", done, err)
	}
	if done, err := at.ran(e, failedAttempt(upstream.ClassRequest), false); !done || err == nil {
		t.Errorf("ran(request refused) = %v, %v; want done with the failure", done, err)
	}
	ok := upstream.Attempt{Committed: true, Exec: sluice.Execution{AccountID: "a1", HTTPStatus: 200}}
	if done, err := at.ran(e, ok, false); !done || err != nil || !at.out.Committed || at.out.Status != 200 {
		t.Errorf("ran(answer) = %v, %v, outcome %+v; want done, committed 200", done, err, at.out)
	}
	if n := len(at.out.Executions); n != 4 || at.out.Executions[0].Expected == nil {
		t.Errorf("executions = %d, first expected %v; want 4, each stamped with the policy's accounts", n, at.out.Executions[0].Expected)
	}
}

// TestAttemptsWaitFailedAnswers: a wait that ended without a claim
// answers by why, most specific first.
func TestAttemptsWaitFailedAnswers(t *testing.T) {
	r := newAttemptsRig(t)
	none := &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}
	code := func(err error) sluice.Code {
		se, _ := errors.AsType[*sluice.Error](err)
		if se == nil {
			return ""
		}
		return se.Code
	}
	plain := r.start(t, "plain", nil)
	if err := plain.waitFailed(capacity.ErrRefused, false, plain.deadline); code(err) != sluice.CodeConcurrencyExceeded {
		t.Errorf("refused = %v, want %s", err, sluice.CodeConcurrencyExceeded)
	}
	if err := plain.waitFailed(none, false, plain.deadline); code(err) != sluice.CodeNoUpstreamAvailable {
		t.Errorf("none left, nothing tried = %v, want %s", err, sluice.CodeNoUpstreamAvailable)
	}
	timeout := &sluice.Error{Code: sluice.CodeCapacityWaitTimeout}
	if err := plain.waitFailed(timeout, false, plain.deadline); code(err) != sluice.CodeCapacityWaitTimeout {
		t.Errorf("class wait over = %v, want %s", err, sluice.CodeCapacityWaitTimeout)
	}
	strict := r.start(t, "strict", nil)
	if err := strict.waitFailed(none, false, strict.deadline); code(err) != sluice.CodeBindingUnavailable {
		t.Errorf("strict, none left = %v, want %s", err, sluice.CodeBindingUnavailable)
	}
	strict.tried, strict.last = 1, upstream.Attempt{Class: upstream.ClassEndpoint, Err: errors.New("connection refused")}
	if err := strict.waitFailed(none, false, strict.deadline); code(err) != sluice.CodeNoUpstreamAvailable || !errors.Is(err, strict.last.Err) {
		t.Errorf("strict, none left after a try = %v, want the last attempt's failure", err)
	}
}

// TestAttemptsPlanRebasesOnAReload: a catalog reload while the request
// waits rebases its admission — a changed route policy holds at once —
// and a key gone from the new catalog stops the request.
func TestAttemptsPlanRebasesOnAReload(t *testing.T) {
	r := newAttemptsRig(t)
	at := r.start(t, "strict", nil)
	admitted := at.cur
	reload := func(catalog string) { r.live.Swap(compileCatalog(t, catalog, testSecrets)) }
	reload(replaceOnce(t, attemptsCatalog, "accounts: [a1]}}", "accounts: [a2]}}"))
	if at.plan(); !slices.Equal(at.accounts(), []string{"a2"}) || at.cur.snap == admitted.snap {
		t.Errorf("plan after the strict key moved to a2 = %v; want [a2], on a rebased admission", at.accounts())
	}
	if at.cur.class != admitted.class || at.cur.task != admitted.task {
		t.Errorf("rebase changed what admission fixed: class %d task %q, want %d %q", at.cur.class, at.cur.task, admitted.class, admitted.task)
	}
	reload(replaceOnce(t, attemptsCatalog, "  - {id: strict, tenant: t, secret_env: K3, policy: {mode: strict, accounts: [a1]}}\n", ""))
	if _, cands := at.plan(); len(cands) != 0 || at.stopped != errKeyInactive {
		t.Fatalf("plan after the key was removed = %d candidates, stopped %v; want none, %v", len(cands), at.stopped, errKeyInactive)
	}
	if err := at.waitFailed(&sluice.Error{Code: sluice.CodeNoUpstreamAvailable}, false, at.deadline); err != errKeyInactive {
		t.Errorf("waitFailed after the key was removed = %v, want %v", err, errKeyInactive)
	}
}

// TestJobsAreAdmittedAsChatIs: a job submit takes its class from its task
// type, as a chat request does: its record and its job say background.
func TestJobsAreAdmittedAsChatIs(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	env := func(string) (string, bool) { return "sk-upstream", true }
	snap := compileCatalog(t, `version: 1
endpoints: [{id: ep, base_url: `+srv.URL+`, protocols: [openai.chat, openai.videos]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models:
  - {alias: fast, deployments: [{model: m, endpoints: [ep]}]}
  - {alias: clip, protocol: openai.videos, deployments: [{model: sora-2, endpoints: [ep]}]}
task_types: [{id: chat}, {id: bulk, priority: {default: background}}]
keys: [{id: web, tenant: web, secret_env: KEY, tasks: [bulk]}]
`, env)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := memstore.New()
	live := &Live{}
	live.Swap(snap)
	recs := &records{}
	h := NewHandler(Stages{
		Live: live, Capacity: capacity.New(mem, mem, "r", time.Minute, log), Statuses: capacity.NewStatuses(mem, log),
		Caller: upstream.New(log, &upstream.Protocols{Dialects: map[sluice.Protocol]*upstream.Dialect{sluice.ProtocolOpenAIVideos: upstream.OpenAIVideos}}, func(string) upstream.BreakerSettings { return upstream.BreakerSettings{Failures: 5, Open: time.Minute} }, nil),
		Usage:  recs, Jobs: sqlstore.New(sqldbtest.Open(t, "sqlite://"+filepath.Join(t.TempDir(), "jobs.db"))), Log: log, Metrics: metrics.New(),
	})
	req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolOpenAIVideos, Model: "clip", Task: "bulk", Received: time.Now(),
		Body: []byte(`{"model":"clip","prompt":"a river"}`)}
	ans, _, err := h.SubmitJob(t.Context(), req, &sluice.Principal{Key: snap.StaticKeys[0]})
	if err != nil || ans == nil {
		t.Fatalf("SubmitJob = %v, %v", ans, err)
	}
	if got := ans.Job.Priority; got != "background" {
		t.Errorf("the job's priority = %q, want background (its task type's)", got)
	}
	if recs.count() != 1 || recs.recs[0].Priority != "background" || recs.recs[0].TaskType != "bulk" {
		t.Errorf("records %+v; want one, background, task bulk", recs.recs)
	}
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q is not in the catalog", old)
	}
	return strings.Replace(s, old, new, 1)
}

// testSecrets resolves every secret of a test catalog to a value of its own.
func testSecrets(name string) (string, bool) { return "sk-secret-value-" + name, true }

// compileCatalog loads and compiles a test catalog, secrets from env.
func compileCatalog(t *testing.T, yaml string, env func(string) (string, bool)) *Snapshot {
	t.Helper()
	cat, err := config.Load([]byte(yaml), env)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Compile(cat, env, "test")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
