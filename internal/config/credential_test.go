package config

import (
	"maps"
	"net/http"
	"strings"
	"testing"
)

// oauthEnv is testEnv with a secret key.
func oauthEnv() map[string]string {
	env := maps.Clone(testEnv)
	env["SLUICE_SECRET_KEY"] = "c2x1aWNlLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctISE=" // 32 bytes
	env["SHORT_KEY"] = "dG9vLXNob3J0"
	return env
}

// withOAuth is base with an oauth credential reading its refresh token from
// a file, and a secret key.
func withOAuth(t *testing.T) *Catalog {
	t.Helper()
	c := base(t)
	file := writeFile(t, t.TempDir(), "refresh", "refresh-token-value-0001\n")
	c.Server.SecretKeyEnv = "SLUICE_SECRET_KEY"
	c.Credentials = append(c.Credentials, Credential{
		ID: "claude-max-1", Endpoints: []string{"anthropic-main"},
		OAuth: OAuth{TokenURL: "https://auth.example.com/oauth/token", ClientID: "client-1", RefreshTokenFile: file, Scopes: []string{"user:inference"}},
	})
	return c
}

func TestValidateCredentialHeadersAndOAuth(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *Catalog)
		want   []string // substrings of the error; none = valid
	}{
		{"valid", func(c *Catalog) {
			c.Credentials[0].Headers = map[string]string{"chatgpt-account-id": "acct-1", "anthropic-beta": "oauth-2025-04-20", "User-Agent": "claude-cli/2"}
		}, nil},
		{"owned headers", func(c *Catalog) {
			c.Credentials[0].Headers = map[string]string{"authorization": "Bearer x", "X-API-KEY": "k", "api-key": "k", "Host": "h",
				"content-length": "1", "Content-Type": "text/plain", "Transfer-Encoding": "chunked", "Connection": "close", "Upgrade": "h2c", "Accept-Encoding": "gzip"}
		}, []string{
			"credentials[0].headers.authorization: Sluice sets Authorization itself", "headers.X-API-KEY: Sluice sets X-Api-Key", "headers.api-key: Sluice sets Api-Key",
			"headers.Host:", "headers.content-length:", "headers.Content-Type:", "headers.Transfer-Encoding:", "headers.Connection:", "headers.Upgrade:", "headers.Accept-Encoding:",
		}},
		{"bad names and values", func(c *Catalog) {
			c.Credentials[0].Headers = map[string]string{"bad name": "v", "X-Split": "a\r\nInjected: yes", "X-Empty": "", "X-Padded": " v"}
		}, []string{`credentials[0].headers["bad name"]: not a valid header name`, "headers.X-Split: value must not contain control characters",
			"headers.X-Empty: value must not be empty", "headers.X-Padded: value must not start or end with white space"}},
		{"same header twice", func(c *Catalog) {
			c.Credentials[0].Headers = map[string]string{"X-Account": "a", "x-account": "b"}
		}, []string{"headers.x-account: the same header as X-Account"}},
		{"oauth and a secret", func(c *Catalog) { c.Credentials[2].SecretEnv = "ANTHROPIC_KEY_1" },
			[]string{"credentials[2]: set only one of secret_env, secret_file and oauth"}},
		{"oauth incomplete", func(c *Catalog) { c.Credentials[2].OAuth = OAuth{Scopes: []string{"a b"}} },
			[]string{"credentials[2].oauth.token_url: required", "credentials[2].oauth.client_id: required",
				"credentials[2].oauth.refresh_token_file: required", "credentials[2].oauth.scopes[0]: must be one scope"}},
		{"oauth token url", func(c *Catalog) { c.Credentials[2].OAuth.TokenURL = "ftp://auth.example.com/token" },
			[]string{"credentials[2].oauth.token_url: must be an absolute http:// or https:// URL"}},
		{"oauth token url user info", func(c *Catalog) { c.Credentials[2].OAuth.TokenURL = "https://u:pw@auth.example.com/token" },
			[]string{"credentials[2].oauth.token_url: must not contain user info"}},
		{"oauth refresh token file missing", func(c *Catalog) { c.Credentials[2].OAuth.RefreshTokenFile = "/nonexistent/refresh" },
			[]string{"credentials[2].oauth.refresh_token_file: open /nonexistent/refresh"}},
		{"no secret key", func(c *Catalog) { c.Server.SecretKeyEnv = "" },
			[]string{"server.secret_key_env: required (or server.secret_key_file): credentials[2] is an oauth credential"}},
		{"no secret key, database in memory", func(c *Catalog) {
			c.Server.SecretKeyEnv = ""
			c.Database.URL = "sqlite://:memory:"
		}, nil},
		{"secret key too short", func(c *Catalog) { c.Server.SecretKeyEnv = "SHORT_KEY" },
			[]string{"server.secret_key_env: must hold 32 bytes in base64"}},
		{"secret key env and file", func(c *Catalog) { c.Server.SecretKeyFile = "/run/secrets/key" },
			[]string{"server.secret_key_env: set only one of secret_key_env and secret_key_file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := withOAuth(t)
			tc.change(c)
			err := Validate(c, lookup(oauthEnv()))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate error lacks %q:\n%v", w, err)
				}
			}
			for _, secret := range []string{"Bearer x", "Injected", "acct-1", "refresh-token-value-0001", "dG9vLXNob3J0"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Validate error quotes the value %q:\n%v", secret, err)
				}
			}
		})
	}
}

func TestCredentialHeaderAndSecrets(t *testing.T) {
	c := withOAuth(t)
	c.Credentials[0].Headers = map[string]string{"chatgpt-account-id": "acct-1"}
	if got := c.Credentials[0].Header(); !equalHeader(got, http.Header{"Chatgpt-Account-Id": {"acct-1"}}) {
		t.Errorf("Header() = %v", got)
	}
	if s, err := c.Credentials[2].Secret(lookup(oauthEnv())); s != "" || err != nil {
		t.Errorf("an oauth credential's Secret() = %q, %v; want no static secret", s, err)
	}
	if rt, err := c.Credentials[2].OAuth.RefreshToken(); rt != "refresh-token-value-0001" || err != nil {
		t.Errorf("RefreshToken() = %q, %v", rt, err)
	}
	key, err := c.Server.SecretKey(lookup(oauthEnv()))
	if err != nil || len(key) != SecretKeySize {
		t.Errorf("SecretKey() = %d bytes, %v", len(key), err)
	}
}

func TestDecodeCredentialOAuthNamesTheLine(t *testing.T) {
	doc := strings.Replace(baseYAML, "  - {id: anthropic-k1, secret_env: ANTHROPIC_KEY_1, endpoints: [anthropic-main]}",
		"  - id: anthropic-k1\n    oauth: {token_url: https://a.example/token, client_id: c, refresh_file: /x}\n    endpoints: [anthropic-main]", 1)
	_, err := Decode([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), `line 17: unknown field "refresh_file" in credentials[1].oauth`) {
		t.Fatalf("Decode = %v, want the misspelt oauth field named with its line", err)
	}
}

func equalHeader(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return strings.Join(x, "\x00") == strings.Join(y, "\x00") })
}
