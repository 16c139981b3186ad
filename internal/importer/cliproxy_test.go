package importer_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/importer"
)

// cliproxyAuthFiles reads the fixture's auth folder, by file name.
func cliproxyAuthFiles(t *testing.T) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "cliproxyapi", "auth")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

func importCLIProxy(t *testing.T) *importer.Result {
	t.Helper()
	res, err := importer.CLIProxyAPI(readFixture(t, "cliproxyapi/config.yaml"), cliproxyAuthFiles(t), "secrets")
	if err != nil {
		t.Fatalf("CLIProxyAPI: %v", err)
	}
	return res
}

func TestCLIProxyAPIGolden(t *testing.T) {
	res := importCLIProxy(t)
	golden(t, "cliproxyapi/catalog.golden.yaml", res.Catalog)
	golden(t, "cliproxyapi/report.golden.md", []byte(res.Report.String()))
}

// TestCLIProxyAPICatalogValidates writes the secret files the import
// returns and loads the catalog as `sluice check` does; no secret of the
// source — keys, tokens, the management key, the proxy's password — is in
// the catalog or the report.
func TestCLIProxyAPICatalogValidates(t *testing.T) {
	res := importCLIProxy(t)
	dir := t.TempDir()
	catalog := bytes.ReplaceAll(res.Catalog, []byte("secrets/"), []byte(dir+"/"))
	for path, secret := range res.SecretFiles {
		if err := os.WriteFile(filepath.Join(dir, strings.TrimPrefix(path, "secrets/")), secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	source := append(readFixture(t, "cliproxyapi/config.yaml"), bytes.Join(mapValues(cliproxyAuthFiles(t)), nil)...)
	for _, fake := range bytesOf(source, "FAKE") {
		if bytes.Contains(res.Catalog, fake) || strings.Contains(res.Report.String(), string(fake)) {
			t.Errorf("a secret of the source is written out: %s", fake)
		}
	}
	env := map[string]string{"SLUICE_SECRET_KEY": "c2x1aWNlLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctISE="}
	c, err := config.Load(catalog, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("imported catalog is invalid: %v\n%s", err, catalog)
	}
	oauth := 0
	for _, cr := range c.Credentials {
		if cr.OAuth.Set() {
			oauth++
		}
	}
	// 4 Claude logins (one disabled), a Qwen one, 3 Codex ones and 2 Gemini
	// CLI logins (one of 2 projects); 2 Gemini, 1 legacy Gemini, 2 Claude,
	// 1 Codex (of 2) API keys, and 3 OpenAI-compatible.
	if len(c.Models) < 10 || oauth != 10 || len(c.Credentials) != 19 || len(c.Keys) != 3 {
		t.Errorf("imported %d aliases, %d credentials (%d oauth), %d keys; want 10 or more, 19 (10 oauth), 3", len(c.Models), len(c.Credentials), oauth, len(c.Keys))
	}
	if got := string(res.SecretFiles["secrets/key-client-2"]); got != "sk-cpa-FAKE-ci-8d2e4f6a0b1c" {
		t.Errorf("api-keys[1] keeps secret %q, want the key callers have", got)
	}
	if got := string(res.SecretFiles["secrets/claude-bob-example.com-refresh-token"]); got != "sk-ant-ort01-FAKE-refresh-bob" {
		t.Errorf("bob's login: refresh token file holds %q, want the auth file's refresh_token", got)
	}
	// A Gemini CLI login's credentials (one per project) read its refresh
	// token and Gemini CLI's client secret from files, never the catalog.
	secret := res.SecretFiles["secrets/gemini-cli-client-secret"]
	if len(secret) == 0 || bytes.Contains(res.Catalog, secret) || strings.Contains(res.Report.String(), string(secret)) {
		t.Errorf("Gemini CLI's client secret: file %q, or in the catalog or report", secret)
	}
	var grace []string
	for _, cr := range c.Credentials {
		if strings.HasPrefix(cr.ID, "gemini-cli-grace") {
			grace = append(grace, cr.ID)
			rt, _ := cr.OAuth.RefreshToken()
			cs, _ := cr.OAuth.ClientSecret(nil)
			if rt != "1//FAKE-gemini-refresh-grace" || cs != string(secret) || cr.OAuth.ClientID == "" {
				t.Errorf("%s: refresh token %q, client secret %q, client %q", cr.ID, rt, cs, cr.OAuth.ClientID)
			}
		}
	}
	if len(grace) != 2 {
		t.Errorf("grace's login of 2 projects: credentials %v", grace)
	}
}

// bytesOf returns every whitespace- or quote-delimited word of doc that
// contains marker.
func bytesOf(doc []byte, marker string) [][]byte {
	var out [][]byte
	for _, w := range bytes.FieldsFunc(doc, func(r rune) bool { return strings.ContainsRune(" \t\n\",:{}[]", r) }) {
		if bytes.Contains(w, []byte(marker)) {
			out = append(out, w)
		}
	}
	return out
}

func mapValues(m map[string][]byte) [][]byte {
	var out [][]byte
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestCLIProxyAPIAccountsInferred checks that Claude logins of one email
// are one account, a login of another email another, Codex logins of one
// account_id one account whichever email signed in (the report saying when
// the id token named it), and that logins Sluice cannot serve are reported
// with the logins of their upstream account.
func TestCLIProxyAPIAccountsInferred(t *testing.T) {
	res := importCLIProxy(t)
	accounts := map[string]string{}
	for _, l := range res.Report.Accounts {
		accounts[l.Field] = l.Note
	}
	alice := accounts["claude-alice-example.com"]
	if !strings.Contains(alice, "claude-alice@example.com.json") || !strings.Contains(alice, "claude-alice@example.com-desktop.json") {
		t.Errorf("alice's account: %q, want both of her login files", alice)
	}
	if bob := accounts["claude-bob-example.com"]; strings.Contains(bob, "alice") || bob == "" {
		t.Errorf("bob's account: %q, want his login alone", bob)
	}
	// Gemini CLI logins are grouped by project: frank's and grace's share
	// proj-alpha-123, and grace's other project is an account of its own.
	alpha, beta := accounts["gemini-cli-proj-alpha-123"], accounts["gemini-cli-proj-beta-456"]
	if !strings.Contains(alpha, "frank@example.com-proj-alpha-123.json (project_id proj-alpha-123)") || !strings.Contains(alpha, "grace@example.com-proj-alpha-123.json (project_id proj-alpha-123)") {
		t.Errorf("proj-alpha-123's account: %q, want frank's and grace's logins", alpha)
	}
	if !strings.Contains(beta, "grace") || strings.Contains(beta, "frank") {
		t.Errorf("proj-beta-456's account: %q, want grace's login alone", beta)
	}
	team := accounts["codex-acct-team-9f8e"]
	for _, want := range []string{"codex-dave@example.com.json (account_id acct-team-9f8e)", "codex-erin@example.com.json (account_id acct-team-9f8e)"} {
		if !strings.Contains(team, want) {
			t.Errorf("the Codex team's account: %q, want it inferred from %s", team, want)
		}
	}
	// olga's file has an empty account_id: her account is her id token's.
	if olga, want := accounts["codex-acct-olga-5c2d"], "codex-olga@example.com.json (id token's chatgpt_account_id acct-olga-5c2d)"; !strings.Contains(olga, want) {
		t.Errorf("olga's account: %q, want it inferred from %s", olga, want)
	}
	notes := map[string]string{}
	for _, l := range res.Report.NotMapped {
		notes[l.Field] = l.Note
	}
	for field, want := range map[string]string{
		"auth/claude-carol@example.com.json": "not imported: disabled in CLIProxyAPI",
		"auth/iflow-ivan@example.com.json":   `auth type "iflow"`,
	} {
		if !strings.Contains(notes[field], want) {
			t.Errorf("%s: %q, want it to say %q", field, notes[field], want)
		}
	}
}

// TestCLIProxyAPICodexLogins checks what a Codex (ChatGPT) login becomes:
// an oauth credential refreshed at OpenAI's token endpoint with the Codex
// CLI's public client, naming its account in chatgpt-account-id (olga's
// file has none: her id token's claim names it), on an endpoint on the
// ChatGPT backend, serving CLIProxyAPI's Codex models under
// oauth-model-alias.
func TestCLIProxyAPICodexLogins(t *testing.T) {
	res := importCLIProxy(t)
	c, err := config.Decode(res.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := map[string]config.Endpoint{}
	for _, e := range c.Endpoints {
		endpoints[e.ID] = e
	}
	var logins []config.Credential
	for _, cr := range c.Credentials {
		if strings.HasPrefix(cr.ID, "codex-") && cr.OAuth.Set() {
			logins = append(logins, cr)
		}
	}
	if len(logins) != 3 {
		t.Fatalf("%d Codex logins imported, want dave's, erin's and olga's", len(logins))
	}
	for _, cr := range logins {
		ep := endpoints[cr.Endpoints[0]]
		o := cr.OAuth
		account := "acct-team-9f8e"
		if cr.ID == "codex-olga-example.com" {
			account = "acct-olga-5c2d"
		}
		switch {
		case cr.Account != "codex-"+account || cr.Headers["chatgpt-account-id"] != account:
			t.Errorf("%s: account %q, headers %v; want %s's account, named in chatgpt-account-id", cr.ID, cr.Account, cr.Headers, account)
		case o.TokenURL != "https://auth.openai.com/oauth/token" || o.ClientID != "app_EMoamEEZ73f0CkXaXp7hrann" || o.Body != config.OAuthBodyJSON:
			t.Errorf("%s: oauth %+v, want the Codex CLI's public client at auth.openai.com, JSON body", cr.ID, o)
		case ep.ChatGPT == nil || ep.BaseURL != "https://chatgpt.com/backend-api/codex" || len(ep.Protocols) != 1 || ep.Protocols[0] != "openai.responses":
			t.Errorf("%s: endpoint %+v, want openai.responses on the ChatGPT backend", cr.ID, ep)
		case strings.Join(cr.Models, ",") != "gpt-5,gpt-5-codex":
			t.Errorf("%s: models %v, want CLIProxyAPI's Codex list", cr.ID, cr.Models)
		}
	}
	if got := string(res.SecretFiles["secrets/codex-dave-example.com-refresh-token"]); got != "rt_FAKE-codex-refresh-dave" {
		t.Errorf("dave's login: refresh token file holds %q, want the auth file's refresh_token", got)
	}
	onBackend := map[string]string{} // alias → the model it deploys on the backend
	for _, m := range c.Models {
		for _, d := range m.Deployments {
			if endpoints[d.Endpoints[0]].ChatGPT != nil {
				onBackend[m.Alias] = d.Model
			}
		}
	}
	if len(onBackend) != 2 || onBackend["g5"] != "gpt-5" || onBackend["gpt-5-codex"] != "gpt-5-codex" {
		t.Errorf("aliases on the backend %v: want g5 (oauth-model-alias of gpt-5) and gpt-5-codex", onBackend)
	}
}

// A Codex login's account is one line of the report, on the field it was
// read from: account_id, or id_token when the file's account_id is empty.
func TestCLIProxyAPICodexAccountIsOneLine(t *testing.T) {
	res := importCLIProxy(t)
	notes := map[string][]string{} // field → its lines, in every section
	for _, l := range slices.Concat(res.Report.Mapped, res.Report.Approximate, res.Report.NotMapped) {
		notes[l.Field] = append(notes[l.Field], l.Note)
	}
	for field, credential := range map[string]string{
		"auth/codex-dave@example.com.json.account_id": "codex-dave-example.com",
		"auth/codex-olga@example.com.json.id_token":   "codex-olga-example.com",
	} {
		if n := notes[field]; len(n) != 1 || !strings.Contains(n[0], "the upstream account of every codex login") ||
			!strings.Contains(n[0], "credential "+credential+"'s chatgpt-account-id header") {
			t.Errorf("%s: %q, want one line naming its upstream account and %s's header", field, n, credential)
		}
	}
	if n := notes["auth/codex-olga@example.com.json.account_id"]; len(n) > 0 {
		t.Errorf("olga's account_id, empty, is reported as her account: %q", n)
	}
}

// A Codex login that names no ChatGPT account, in its account_id or its
// id token, cannot be served: the backend routes by the account.
func TestCLIProxyAPICodexLoginWithoutAccount(t *testing.T) {
	login := []byte(`{"type": "codex", "email": "p@example.com", "account_id": "", "id_token": "not.a.jwt", "refresh_token": "rt"}`)
	res, err := importer.CLIProxyAPI([]byte("claude-api-key: [{api-key: k}]"), map[string][]byte{"codex-p.json": login}, "secrets")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Report.NotMapped {
		if l.Field == "auth/codex-p.json" && strings.Contains(l.Note, "name no ChatGPT account") {
			return
		}
	}
	t.Errorf("the login is not reported as unservable: %v", res.Report.NotMapped)
}

// A Qwen login is served on the host its resource_url names, with or
// without a scheme and a trailing slash, on Qwen Code's path; without one,
// on Qwen's portal.
func TestCLIProxyAPIQwenResourceURL(t *testing.T) {
	for resource, want := range map[string]string{
		`"resource_url": "https://dashscope.example.com/",`: "https://dashscope.example.com/v1",
		`"resource_url": "dashscope.example.com",`:          "https://dashscope.example.com/v1",
		`"resource_url": "",`:                               "https://portal.qwen.ai/v1",
		``:                                                  "https://portal.qwen.ai/v1",
	} {
		login := []byte(`{"type": "qwen", "email": "q@example.com", ` + resource + ` "refresh_token": "rt"}`)
		res, err := importer.CLIProxyAPI([]byte("debug: false"), map[string][]byte{"qwen-q.json": login}, "secrets")
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Decode(res.Catalog)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Endpoints) != 1 || c.Endpoints[0].BaseURL != want {
			t.Errorf("%s: endpoints %+v, want one at %s", login, c.Endpoints, want)
		}
	}
}

func TestCLIProxyAPIReportsEveryField(t *testing.T) {
	res := importCLIProxy(t)
	notMapped := map[string]bool{}
	for _, l := range res.Report.NotMapped {
		notMapped[l.Field] = true
	}
	for _, field := range []string{
		"tls", "remote-management", "logging-to-file", "logs-max-total-size-mb", "usage-statistics-enabled", "max-retry-interval",
		"disable-cooling", "ws-auth", "payload", "quota-exceeded.switch-preview-model",
		"gemini-api-key[0].models[1].display-name", "gemini-api-key[1].weight", "claude-api-key[1].proxy-url", "claude-api-key[1].headers",
		"claude-api-key[1].cloak", "codex-api-key[1]", "openai-compatibility[0].api-key-entries[1].proxy-url", "openai-compatibility[2]",
		"auth/claude-alice@example.com.json.access_token", "auth/claude-alice@example.com.json.expired",
		"auth/claude-alice@example.com-desktop.json.proxy_url", "auth/frank@example.com-proj-alpha-123.json.auto",
		"auth/frank@example.com-proj-alpha-123.json.token.access_token", "auth/grace@example.com-proj-alpha-123.json.checked",
	} {
		if !notMapped[field] {
			t.Errorf("%s is not reported as not mapped", field)
		}
	}
}

func TestCLIProxyAPIMalformedInputNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		config string
		auth   map[string][]byte
		want   string
	}{
		{"gemini-api-key: [{base-url: https://g.example.com}]", nil, "config: gemini-api-key[0].api-key: is required"},
		{"openai-compatibility: [{name: x, api-key-entries: [{api-key: k}], models: [{name: m}]}]", nil, "config: openai-compatibility[0].base-url: is required"},
		{"claude-api-key: [{api-key: k, models: [{alias: a}]}]", nil, "config: claude-api-key[0].models[0].name: is required"},
		{"routing: {strategy: random}\nclaude-api-key: [{api-key: k}]", nil, `config: routing.strategy: "random" is not`},
		{"port: eighty", nil, "config: port: must be a number"},
		{"claude-api-key: [{api-key: k}]", map[string][]byte{"a.json": []byte("{not json")}, "auth-dir: a.json: not JSON"},
		{"claude-api-key: [{api-key: k}]", map[string][]byte{"b.json": []byte(`{"type": 3}`)}, "auth-dir: auth/b.json.type: must be a string"},
		{"debug: true", nil, "config: no provider key or login serves a model"},
	} {
		_, err := importer.CLIProxyAPI([]byte(tc.config), tc.auth, "s")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.config, err, tc.want)
		}
	}
}

// FuzzCLIProxyAPI checks that any config.yaml and auth file either imports
// or fails with an input error, and never panics.
func FuzzCLIProxyAPI(f *testing.F) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "cliproxyapi", "config.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture, []byte(`{"type": "claude", "email": "a@b.c", "refresh_token": "rt"}`))
	f.Add([]byte("claude-api-key: [{api-key: k, prefix: p, models: [{name: m, alias: a}]}]\nforce-model-prefix: true"), []byte(`{"type": "qwen", "refresh_token": "rt", "resource_url": "x"}`))
	f.Add([]byte("openai-compatibility: [{name: x, base-url: u, api-keys: [k], models: [{name: m}]}]\nrouting: {session-affinity: true}"), []byte(`{"type": "codex"}`))
	f.Fuzz(func(t *testing.T, config, auth []byte) {
		res, err := importer.CLIProxyAPI(config, map[string][]byte{"login.json": auth}, "secrets")
		if _, ok := errors.AsType[*importer.InputError](err); err != nil && !ok || err == nil && res == nil {
			t.Fatalf("got %v, %v: want a result or an input error", res, err)
		}
	})
}
