package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/simulator"
)

func init() {
	testEnv["KEY_POLICY"] = "sk-sluice-policy-KEY-3c5e7a9b1d2f4e6a"
	testEnv["KEY_CHAT_ONLY"] = "sk-sluice-chat-only-KEY-6b8d0f2a4c6e8a1c"
	testEnv["KEY_FLEX_ONLY"] = "sk-sluice-flex-only-KEY-2e4a6c8e0b2d4f6b"
}

// keySource starts a gateway on tpl and gives it a key with settings:
// declared in the catalog (as yaml) or created through the admin API (as
// spec). It returns the harness and the key's plaintext.
type keySource func(t *testing.T, tpl, yaml string, spec admin.KeySettings) (*harness, string)

var keySources = []struct {
	name string
	make keySource
}{
	{"catalog", func(t *testing.T, tpl, yaml string, _ admin.KeySettings) (*harness, string) {
		tpl = strings.Replace(tpl, "keys:\n", "keys:\n  - {id: policy, tenant: t, secret_env: KEY_POLICY, "+yaml+"}\n", 1)
		return newHarnessWith(t, tpl, "{backend: memory}", simAccounts()), testEnv["KEY_POLICY"]
	}},
	{"api", func(t *testing.T, tpl, _ string, spec admin.KeySettings) (*harness, string) {
		h := newHarnessWith(t, tpl, "{backend: memory}", simAccounts())
		created, err := h.adminClient().CreateKey(t.Context(), admin.KeySpec{ID: "policy", Name: "policy", Tenant: "t", KeySettings: spec})
		if err != nil {
			t.Fatalf("CreateKey: %v", err)
		}
		return h, created.Key
	}},
}

func (h *harness) adminClient() *adminclient.Client {
	return adminclient.NewClient("http://"+h.gw.AdminAddr(), testEnv["ADMIN_TOKEN"])
}

// keysTemplate is accountsTemplate with its credentials and a pool of org-2.
var keysTemplate = strings.Replace(accountsTemplate, "%smodels:", accountCredentials+"models:", 1) +
	"pools:\n  - {id: cheap, accounts: [org-2]}\n"

// sdkCode returns the status and code of an SDK error; 200 and "" for none.
func sdkCode(t *testing.T, err error) (int, string) {
	t.Helper()
	if err == nil {
		return http.StatusOK, ""
	}
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an API error", err)
	}
	return e.StatusCode, e.Code
}

// TestAPIKeyBehavesLikeCatalogKey: one test body, two sources. A key bound
// to org-2 (strictly, or through a pool) with its own max_inflight of 1
// sends every request to org-2, never more than one at a time, whether it
// was declared in the catalog or created through the admin API.
func TestAPIKeyBehavesLikeCatalogKey(t *testing.T) {
	settings := []struct {
		name string
		yaml string
		spec admin.KeySettings
	}{
		{"Strict", "policy: {mode: strict, accounts: [org-2]}, limits: {max_inflight: 1}",
			admin.KeySettings{Policy: admin.KeyPolicy{Mode: "strict", Accounts: []string{"org-2"}}, Limits: admin.KeyLimits{MaxInflight: 1}}},
		{"Pool", "policy: {mode: pool, pool: cheap}, limits: {max_inflight: 1}",
			admin.KeySettings{Policy: admin.KeyPolicy{Mode: "pool", Pool: "cheap"}, Limits: admin.KeyLimits{MaxInflight: 1}}},
	}
	for _, s := range settings {
		for _, src := range keySources {
			t.Run(s.name+"/"+src.name, func(t *testing.T) {
				h, key := src.make(t, keysTemplate, s.yaml, s.spec)
				c := h.sdk(key)
				statuses := make([]int, 4)
				var wg sync.WaitGroup
				for i := range statuses {
					wg.Go(func() {
						_, err := c.Chat.Completions.New(t.Context(), chatParams("two"))
						statuses[i], _ = sdkCode(t, err)
					})
				}
				wg.Wait()
				allOK(t, statuses)
				org1 := h.simA.Count(upstreamKey("k1")) + h.simA.Count(upstreamKey("k2")) + h.simA.Count(upstreamKey("k3"))
				if peak := h.simA.MaxInFlight("org-2"); org1 != 0 || peak != 1 {
					t.Errorf("%d calls on org-1, org-2 peak %d; want 0 (bound to org-2) and 1 (the key's max_inflight)", org1, peak)
				}
			})
		}
	}
}

// TestKeyRefusesAtItsOwnLimit: a key with on_limit refuse gets 429
// access_concurrency_exceeded at once when its own max_inflight is in use,
// rather than queueing, from either source.
func TestKeyRefusesAtItsOwnLimit(t *testing.T) {
	for _, src := range keySources {
		t.Run(src.name, func(t *testing.T) {
			h, key := src.make(t, keysTemplate, "limits: {max_inflight: 1}, on_limit: refuse",
				admin.KeySettings{Limits: admin.KeyLimits{MaxInflight: 1}, OnLimit: "refuse"})
			c := h.sdk(key)
			codes := make([]string, 3)
			statuses := make([]int, 3)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() {
					_, err := c.Chat.Completions.New(t.Context(), chatParams("one"))
					statuses[i], codes[i] = sdkCode(t, err)
				})
			}
			wg.Wait()
			ok, refused := 0, 0
			for i := range codes {
				switch {
				case statuses[i] == http.StatusOK:
					ok++
				case statuses[i] == http.StatusTooManyRequests && codes[i] == string(sluice.CodeConcurrencyExceeded):
					refused++
				default:
					t.Errorf("request %d = %d %s, want 200 or 429 access_concurrency_exceeded", i, statuses[i], codes[i])
				}
			}
			if ok == 0 || refused == 0 || h.simA.MaxInFlight("org-1") != 1 {
				t.Errorf("%d answered, %d refused, org-1 peak %d; want some of each and never two at once", ok, refused, h.simA.MaxInFlight("org-1"))
			}
			// Alone, the key has room again.
			if _, err := c.Chat.Completions.New(t.Context(), chatParams("one")); err != nil {
				t.Errorf("a request after the others ended: %v", err)
			}
		})
	}
}

// TestKeyRefusesWhileWaitingForTheUpstream: a request of a key with
// on_limit refuse that waits for a full upstream account is refused, not
// kept waiting for its own limit, once another request of the key takes
// the key's only slot on another account.
func TestKeyRefusesWhileWaitingForTheUpstream(t *testing.T) {
	for _, src := range keySources {
		t.Run(src.name, func(t *testing.T) {
			h, key := src.make(t, keysTemplate, "limits: {max_inflight: 1}, on_limit: refuse",
				admin.KeySettings{Limits: admin.KeyLimits{MaxInflight: 1}, OnLimit: "refuse"})
			for _, id := range []string{"k1", "k2", "k3"} {
				h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-1", Latency: 500 * time.Millisecond})
			}
			for _, id := range []string{"k4", "k5"} {
				h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-2", Latency: 2 * time.Second})
			}
			var wg sync.WaitGroup
			wg.Go(func() { allOK(t, h.burst(t.Context(), 2, "one")) }) // org-1 full for 500ms
			eventually(t, 2*time.Second, "org-1 full", func() bool { return h.simA.InFlight() == 2 })
			c := h.sdk(key)
			var waiting error
			wg.Go(func() { _, waiting = c.Chat.Completions.New(t.Context(), chatParams("one")) })
			eventually(t, 2*time.Second, "the key's request waits for org-1", func() bool { return h.accounts(t)["org-1"].Waiting == 1 })
			if _, err := c.Chat.Completions.New(t.Context(), chatParams("just-two")); err != nil { // holds the key's slot for 2s
				t.Errorf("the key's request on org-2: %v", err)
			}
			wg.Wait()
			if status, code := sdkCode(t, waiting); status != http.StatusTooManyRequests || code != string(sluice.CodeConcurrencyExceeded) {
				t.Errorf("the waiting request = %d %s, want 429 access_concurrency_exceeded once org-2 held the key's slot", status, code)
			}
		})
	}
}

// admissionTemplate adds to the harness catalog a key that may only call
// chat, one that may only name the flex tier, and a pool.
var admissionTemplate = strings.Replace(catalogTemplate, "keys:\n", `pools:
  - {id: p, accounts: [cred-b1]}
keys:
  - {id: chat-only, tenant: web, secret_env: KEY_CHAT_ONLY, paths: [chat]}
  - {id: flex-only, tenant: web, secret_env: KEY_FLEX_ONLY, service_tiers: [flex]}
`, 1)

// TestAPIKeyReachesAnotherGateway: a key created through the admin API of
// one gateway authenticates on a second gateway on the same database
// within about a second (its keyring's refresh), with its policy: bound
// strictly to org-2, none of its requests there reaches org-1.
func TestAPIKeyReachesAnotherGateway(t *testing.T) {
	h := newHarnessWith(t, keysTemplate, "{backend: memory}", simAccounts())
	second := h.another(t)
	created, err := h.adminClient().CreateKey(t.Context(), admin.KeySpec{ID: "replicated", Name: "replicated", Tenant: "t",
		KeySettings: admin.KeySettings{Policy: admin.KeyPolicy{Mode: "strict", Accounts: []string{"org-2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	chat := func() int {
		code, _ := call(t, http.MethodPost, "http://"+second.Addr()+"/v1/chat/completions", "Bearer "+created.Key,
			`{"model":"two","messages":[{"role":"user","content":"hi"}]}`, nil)
		return code
	}
	start := time.Now()
	eventually(t, 3*time.Second, "the second gateway knows the new key", func() bool { return chat() == http.StatusOK })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the second gateway took %v to know the new key, want about a second", took)
	}
	for range 4 {
		if code := chat(); code != http.StatusOK {
			t.Errorf("request through the second gateway = %d, want 200", code)
		}
	}
	org1 := h.simA.Count(upstreamKey("k1")) + h.simA.Count(upstreamKey("k2")) + h.simA.Count(upstreamKey("k3"))
	if org2 := h.simA.Count(upstreamKey("k4")) + h.simA.Count(upstreamKey("k5")); org1 != 0 || org2 != 5 {
		t.Errorf("the key bound to org-2, through the second gateway: %d calls on org-1, %d on org-2; want 0 and 5", org1, org2)
	}
}

// TestModelsListsOnlyTheKeysPaths: GET /v1/models lists the aliases a key
// may use on the paths it may call: a key scoped to chat does not see the
// embeddings alias, one scoped to embeddings sees only that.
func TestModelsListsOnlyTheKeysPaths(t *testing.T) {
	h := newHarnessWith(t, admissionTemplate, "{backend: memory}", simulator.Options{})
	created, err := h.adminClient().CreateKey(t.Context(), admin.KeySpec{ID: "embed-only", Name: "embed-only", Tenant: "web",
		KeySettings: admin.KeySettings{Paths: []string{"embeddings"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		want []string
	}{
		{"chat", testEnv["KEY_CHAT_ONLY"], []string{"fast", "only-a"}},
		{"embeddings", created.Key, []string{"embed"}},
		{"all", keyWeb, []string{"embed", "fast", "only-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := h.sdk(tt.key).Models.List(t.Context())
			if err != nil {
				t.Fatalf("Models.List: %v", err)
			}
			var got []string
			for _, m := range page.Data {
				got = append(got, m.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Models.List = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAdmissionRefusals: each refusal of admission, in its order, through
// the OpenAI SDK.
func TestAdmissionRefusals(t *testing.T) {
	h := newHarnessWith(t, admissionTemplate, "{backend: memory}", simulator.Options{})
	ctx := t.Context()
	created, err := h.adminClient().CreateKey(ctx, admin.KeySpec{ID: "pooled", Name: "pooled", Tenant: "web",
		KeySettings: admin.KeySettings{Policy: admin.KeyPolicy{Mode: "pool", Pool: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	chat := func(key, model string, tier openai.ChatCompletionNewParamsServiceTier) func() error {
		return func() error {
			p := chatParams(model)
			p.ServiceTier = tier
			_, err := h.sdk(key).Chat.Completions.New(ctx, p)
			return err
		}
	}
	embed := func(key string) func() error {
		return func() error {
			_, err := h.sdk(key).Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
			return err
		}
	}
	tests := []struct {
		name   string
		call   func() error
		status int
		code   sluice.Code
	}{
		{"UnknownKey", chat("sk-sluice-unknown", "fast", ""), 401, sluice.CodeNoCredentials},
		{"MissingAliasForAScopedKey", chat(keyScoped, "nope", ""), 404, sluice.CodeModelNotFound},
		{"MissingAlias", chat(keyWeb, "nope", ""), 404, sluice.CodeModelNotFound},
		{"AliasOutOfScope", chat(keyScoped, "only-a", ""), 403, sluice.CodeScopeDenied},
		{"PathOutOfScope", embed(testEnv["KEY_CHAT_ONLY"]), 403, sluice.CodeScopeDenied},
		{"PathInScope", chat(testEnv["KEY_CHAT_ONLY"], "fast", ""), 200, ""},
		{"TierOutOfScope", chat(testEnv["KEY_FLEX_ONLY"], "fast", openai.ChatCompletionNewParamsServiceTierPriority), 403, sluice.CodeScopeDenied},
		{"TierInScope", chat(testEnv["KEY_FLEX_ONLY"], "fast", openai.ChatCompletionNewParamsServiceTierFlex), 200, ""},
		{"NoTierNamed", chat(testEnv["KEY_FLEX_ONLY"], "fast", ""), 200, ""},
		{"PooledKey", chat(created.Key, "fast", ""), 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code := sdkCode(t, tt.call())
			if status != tt.status || code != string(tt.code) {
				t.Errorf("= %d %q, want %d %q", status, code, tt.status, tt.code)
			}
		})
	}

	// The same message for an alias that is missing and one out of scope
	// would tell a key which aliases exist; a missing one reads the same
	// for every key.
	var scoped, web *openai.Error
	errors.As(chat(keyScoped, "nope", "")(), &scoped)
	errors.As(chat(keyWeb, "nope", "")(), &web)
	if scoped == nil || web == nil || scoped.Message != web.Message {
		t.Errorf("missing alias: scoped key %v, unscoped key %v; want the same message", scoped, web)
	}

	t.Run("Unbound", func(t *testing.T) {
		h.writeCatalog(strings.Replace(h.catalog(), "  - {id: p, accounts: [cred-b1]}\n", "  - {id: q, accounts: [cred-b1]}\n", 1))
		eventually(t, 5*time.Second, "the pooled key unbound by a reload without its pool", func() bool {
			status, code := sdkCode(t, chat(created.Key, "fast", "")())
			return status == http.StatusForbidden && code == string(sluice.CodeKeyUnbound)
		})
	})
}

// TestBadKeyWithUnparseableBodyIs401: a bad key learns nothing of its body.
func TestBadKeyWithUnparseableBodyIs401(t *testing.T) {
	h := newHarness(t)
	if status, _, body := h.post(t.Context(), "/v1/chat/completions", "sk-sluice-unknown", `{"model":`); status != http.StatusUnauthorized || !strings.Contains(body, string(sluice.CodeNoCredentials)) {
		t.Errorf("bad key, unparseable body = %d %s; want 401 no_credentials", status, body)
	}
}

// TestKeyDisabledAfterAuthenticationIsInactive: a key disabled between its
// authentication (from the headers) and its admission (after the body) gets
// 403 access_credential_inactive. The caller sends Expect: 100-continue, so
// its body leaves only once the server has authenticated and asks for it;
// the key is disabled right then.
func TestKeyDisabledAfterAuthenticationIsInactive(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	created, err := h.adminClient().CreateKey(ctx, admin.KeySpec{ID: "soon-off", Name: "soon off", Tenant: "web"})
	if err != nil {
		t.Fatal(err)
	}
	disable := func() {
		if _, err := h.adminClient().Disable(context.WithoutCancel(ctx), "soon-off"); err != nil {
			t.Errorf("Disable: %v", err)
		}
	}
	client := &http.Client{Transport: &bodyHook{rt: &http.Transport{ExpectContinueTimeout: time.Minute}, first: disable}}
	c := openai.NewClient(option.WithBaseURL(h.url("/v1/")), option.WithAPIKey(created.Key), option.WithMaxRetries(0),
		option.WithHTTPClient(client), option.WithHeader("Expect", "100-continue"))
	_, err = c.Chat.Completions.New(ctx, chatParams("fast"))
	if status, code := sdkCode(t, err); status != http.StatusForbidden || code != string(sluice.CodeCredentialInactive) {
		t.Errorf("= %d %q, want 403 access_credential_inactive", status, code)
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 0 {
		t.Errorf("the upstreams saw %d requests, want none", n)
	}
}

// bodyHook runs first once, when the transport starts sending the first
// request body.
type bodyHook struct {
	rt    http.RoundTripper
	first func()
	once  sync.Once
}

func (b *bodyHook) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body = &hookedBody{ReadCloser: r.Body, hook: func() { b.once.Do(b.first) }}
	}
	return b.rt.RoundTrip(r)
}

type hookedBody struct {
	io.ReadCloser
	hook func()
}

func (h *hookedBody) Read(p []byte) (int, error) {
	h.hook()
	return h.ReadCloser.Read(p)
}
