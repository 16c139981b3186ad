package app_test

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

type catalogStatus struct {
	Version   int64    `json:"version"`
	LastError string   `json:"last_error"`
	Aliases   []string `json:"aliases"`
}

func (h *harness) status(t *testing.T) catalogStatus {
	t.Helper()
	code, body := h.adminGet("/admin/status")
	var st catalogStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("GET /admin/status = %d %s (%v)", code, body, err)
	}
	return st
}

func TestReloadKeepsTheLastGoodCatalog(t *testing.T) {
	h := newHarness(t)
	v1 := h.status(t).Version

	// A broken catalog (an unknown field) is rejected; the last good one serves.
	h.writeCatalog(strings.Replace(h.catalog(), "  - alias: only-a\n", "  - alias: only-a\n    colour: blue\n", 1))
	eventually(t, 2*time.Second, "bad catalog noticed", func() bool { return h.status(t).LastError != "" })
	st := h.status(t)
	if st.Version != v1 || !strings.Contains(st.LastError, "colour") || !strings.Contains(st.LastError, "line") {
		t.Errorf("status = %+v, want version %d kept and the error naming the field and its line", st, v1)
	}
	if _, body := h.adminGet("/metrics"); !strings.Contains(body, "\nsluice_catalog_reload_failing 1\n") { // not its help text
		t.Error("metrics do not show the failing reload")
	}
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
		t.Fatalf("request with a broken catalog on disk = %d %s, want the last good catalog to serve", code, body)
	}

	// A good catalog with a new alias replaces it.
	h.writeCatalog(strings.Replace(h.catalog(), "keys:\n", "  - alias: extra\n    deployments:\n      - {model: gpt-4o, endpoints: [ep-b]}\nkeys:\n", 1))
	eventually(t, 2*time.Second, "good catalog loaded", func() bool { return h.status(t).Version == v1+1 })
	if st := h.status(t); st.LastError != "" {
		t.Errorf("last error = %q after a good reload, want none", st.LastError)
	}
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "extra", 1)); code != 200 {
		t.Errorf("new alias = %d %s, want 200", code, body)
	}
}

// TestReloadAlarmFollowsTheFile: the alarm (last_error and
// sluice_catalog_reload_failing) goes off when the file holds the serving
// catalog again, and on when the file is deleted, while the last good
// catalog keeps serving.
func TestReloadAlarmFollowsTheFile(t *testing.T) {
	h := newHarness(t)
	v1 := h.status(t).Version
	failing := func() bool {
		_, body := h.adminGet("/metrics")
		return strings.Contains(body, "\nsluice_catalog_reload_failing 1\n")
	}
	h.writeCatalog(strings.Replace(h.catalog(), "  - alias: only-a\n", "  - alias: only-a\n    colour: blue\n", 1))
	eventually(t, 2*time.Second, "bad catalog noticed", func() bool { return h.status(t).LastError != "" && failing() })

	h.writeCatalog(h.catalog()) // the serving document again
	eventually(t, 2*time.Second, "alarm cleared by the serving document", func() bool { return h.status(t).LastError == "" && !failing() })
	if v := h.status(t).Version; v != v1 {
		t.Errorf("version = %d after the file went back, want %d (nothing to reload)", v, v1)
	}

	if err := os.Remove(h.cfgPath); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "deleted file reported", func() bool {
		return strings.Contains(h.status(t).LastError, "read catalog") && failing()
	})
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
		t.Fatalf("request with the catalog file deleted = %d %s, want the last good catalog to serve", code, body)
	}
	h.writeCatalog(h.catalog())
	eventually(t, 2*time.Second, "alarm cleared by the file's return", func() bool { return h.status(t).LastError == "" && !failing() })
}

func TestSIGHUPReloads(t *testing.T) {
	h := newHarness(t)
	v1 := h.status(t).Version
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "reload on SIGHUP", func() bool { return h.status(t).Version > v1 })
}

// TestNoSecretInLogsOrBodies drives successes and every kind of failure,
// then looks for any plaintext secret in the logs, the answers and the admin API.
func TestNoSecretInLogsOrBodies(t *testing.T) {
	h := newHarness(t)
	var bodies strings.Builder
	record := func(_ int, _ any, body string) { bodies.WriteString(body) }
	do := func(key, body string) {
		code, hdr, b := h.post(t.Context(), "/v1/chat/completions", key, body)
		record(code, hdr, b)
	}
	do(keyWeb, chatBody)
	do(keyWeb, `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	do(keyWeb+"x", chatBody)
	do(keyScoped, `{"model":"only-a"}`)
	// Upstream auth failures echo part of the upstream key in their bodies.
	h.simA.SetKey(secretA1, simulator.Behavior{Invalid: true})
	h.simA.SetKey(secretA2, simulator.Behavior{Invalid: true})
	h.simB.SetKey(secretB1, simulator.Behavior{Invalid: true})
	do(keyWeb, chatBody)
	h.failAll(simulator.Behavior{FailStatus: 500})
	do(keyWeb, chatBody)
	for _, p := range []string{"/admin/status", "/admin/keys", "/admin/usage", "/metrics", "/admin/catalog"} {
		_, b := h.adminGet(p)
		bodies.WriteString(b)
	}
	h.usage(t, 5)
	logs := h.logs.String()
	for name, secret := range testEnv {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain the plaintext of %s", name)
		}
		if strings.Contains(bodies.String(), secret) {
			t.Errorf("answers contain the plaintext of %s", name)
		}
	}
	if !strings.Contains(logs, `"msg":"request"`) {
		t.Errorf("no access log lines captured; the check above proves nothing")
	}
}

// TestEditMovingAnAccountKeepsItsCap: an edit that moves an account to
// another capacity domain while calls hold its slots (here the alias that
// joined org-2 to org-1's domain goes, so org-2 gets one of its own): the
// calls count in its new domain too, and the requests after the edit wait
// for them instead of passing its cap beside them.
func TestEditMovingAnAccountKeepsItsCap(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		sim := simAccounts()
		delete(sim.Accounts, "org-2") // no 429 past its cap: the upstream takes what it is sent
		for _, id := range []string{"k4", "k5"} {
			sim.Keys[upstreamKey(id)] = simulator.Behavior{Account: "org-2", Latency: 1500 * time.Millisecond}
		}
		h := newHarnessWith(t, strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1), state, sim)
		body := strings.Replace(chatBody, "fast", "just-two", 1)
		codes := make(chan int, 4)
		var wg sync.WaitGroup
		send := func() {
			wg.Go(func() {
				code, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, body)
				codes <- code
			})
		}
		send()
		send()
		eventually(t, 2*time.Second, "org-2's two slots taken", func() bool { return h.simA.InFlight() == 2 })

		v1 := h.status(t).Version
		joint := "  - alias: two\n    deployments: [{model: m-one, endpoints: [ep-a]}, {model: m-two, endpoints: [ep-a]}]\n"
		if !strings.Contains(h.catalog(), joint) {
			t.Fatal("the catalog has no alias two to remove")
		}
		h.writeCatalog(strings.Replace(h.catalog(), joint, "", 1))
		eventually(t, 2*time.Second, "the edit loaded", func() bool { return h.status(t).Version > v1 })

		send()
		send()
		wg.Wait()
		close(codes)
		for code := range codes {
			if code != 200 {
				t.Errorf("a request for org-2 = %d, want 200 (after waiting for a slot)", code)
			}
		}
		if got := h.simA.MaxInFlight("org-2"); got != 2 {
			t.Errorf("org-2 had %d calls at once upstream, want its cap of 2: the calls granted before the edit did not count after it", got)
		}
	})
}
