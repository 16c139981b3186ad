package admin_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
)

// runCLI runs the CLI against the harness's server.
func (h *harness) runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{adminclient.EnvAdminURL: h.url, adminclient.EnvAdminToken: testToken}
	var out, errOut bytes.Buffer
	code = adminclient.RunCLI(t.Context(), args, &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

var plaintextRE = regexp.MustCompile(`sk-sluice-[0-9A-Za-z]{43}`)

func TestCLIKeys(t *testing.T) {
	h := newHarness(t)

	code, out, errOut := h.runCLI(t, "keys", "create", "--name", "web app", "--tenant", "web", "--models", "fast, smart",
		"--priority", "interactive", "--expires-in", "24h", "--id", "web-1")
	if code != 0 {
		t.Fatalf("keys create exit = %d, stderr %q", code, errOut)
	}
	plaintext := plaintextRE.FindString(out)
	if plaintext == "" || !strings.Contains(out, "cannot be shown again") || !strings.Contains(out, "web-1") {
		t.Fatalf("keys create output lacks the key, the note or the ID:\n%s", out)
	}
	if !authenticates(h.keys, plaintext) {
		t.Error("the printed key does not authenticate")
	}

	code, out, errOut = h.runCLI(t, "keys", "list")
	if code != 0 {
		t.Fatalf("keys list exit = %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("keys list = %q, want a header and one row", out)
	}
	for _, want := range []string{"web-1", "web app", "active", "interactive", "fast, smart"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("keys list row %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(out, plaintext) {
		t.Error("keys list prints the plaintext key")
	}

	code, out, errOut = h.runCLI(t, "keys", "disable", "web-1", "--json") // flags after the ID work too
	if code != 0 {
		t.Fatalf("keys disable exit = %d, stderr %q", code, errOut)
	}
	var rec admin.KeyRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Status != sluice.KeyDisabled {
		t.Fatalf("keys disable --json = %q (%v), want a disabled key record", out, err)
	}
	if authenticates(h.keys, plaintext) {
		t.Error("the key authenticates after keys disable")
	}

	code, out, _ = h.runCLI(t, "keys", "show", "web-1")
	if code != 0 || !regexp.MustCompile(`Status:\s+disabled`).MatchString(out) || strings.Contains(out, plaintext) {
		t.Errorf("keys show = %d %q, want the disabled record without the plaintext", code, out)
	}

	code, out, _ = h.runCLI(t, "keys", "rotate", "web-1")
	rotated := plaintextRE.FindString(out)
	if code != 0 || rotated == "" || rotated == plaintext || !strings.Contains(out, "cannot be shown again") {
		t.Errorf("keys rotate = %d %q, want a new key with the note", code, out)
	}

	code, out, _ = h.runCLI(t, "keys", "models", "web-1", "--all")
	if code != 0 || !strings.Contains(out, "* (all)") {
		t.Errorf("keys models --all = %d %q", code, out)
	}
	code, out, _ = h.runCLI(t, "keys", "expire", "web-1", "--in", "1h")
	if code != 0 || strings.Contains(out, "never") {
		t.Errorf("keys expire --in 1h = %d %q", code, out)
	}

	code, _, errOut = h.runCLI(t, "keys", "revoke", "web-1")
	if code != 0 {
		t.Fatalf("keys revoke exit = %d, stderr %q", code, errOut)
	}
	code, out, errOut = h.runCLI(t, "keys", "enable", "web-1")
	if code != 1 || out != "" || !strings.Contains(errOut, "key_transition_invalid") || !strings.Contains(errOut, "revoked") {
		t.Errorf("keys enable (revoked) = %d, stdout %q, stderr %q; want exit 1 with the API error on stderr", code, out, errOut)
	}
	if strings.Contains(h.logs.String(), plaintext) || strings.Contains(h.logs.String(), rotated) {
		t.Error("a plaintext key reached the log")
	}
}

func TestCLIStatusAndApply(t *testing.T) {
	h := newHarness(t)
	code, out, errOut := h.runCLI(t, "status")
	if code != 0 || !regexp.MustCompile(`Catalog version:\s+1`).MatchString(out) || !strings.Contains(out, "fast") {
		t.Errorf("status = %d %q %q", code, out, errOut)
	}

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("invalid: yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = h.runCLI(t, "apply", "-f", good, "--if-match", "1")
	if code != 0 || !strings.Contains(out, "version 2") {
		t.Errorf("apply good = %d %q %q", code, out, errOut)
	}
	if code, _, errOut = h.runCLI(t, "apply", "-f", good); code != 0 {
		t.Errorf("apply without --if-match = %d %q", code, errOut)
	}
	code, _, errOut = h.runCLI(t, "apply", "-f", good, "--if-match", "1") // stored version 2 serves now
	if code != 1 || !strings.Contains(errOut, "catalog_version_conflict") {
		t.Errorf("apply stale = %d, stderr %q; want exit 1, catalog_version_conflict", code, errOut)
	}
	code, _, errOut = h.runCLI(t, "apply", "-f", bad)
	if code != 1 || !strings.Contains(errOut, "models[0].alias: required") || !strings.Contains(errOut, "endpoints[1].base_url") {
		t.Errorf("apply invalid = %d, stderr %q; want exit 1 with every problem", code, errOut)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"keys without subcommand", []string{"keys"}},
		{"unknown keys subcommand", []string{"keys", "destroy"}},
		{"create without name", []string{"keys", "create", "--tenant", "t"}},
		{"unknown flag", []string{"keys", "list", "--colour"}},
		{"show without id", []string{"keys", "show"}},
		{"show with two ids", []string{"keys", "show", "a", "b"}},
		{"bad expires-at", []string{"keys", "create", "--name", "n", "--tenant", "t", "--expires-at", "soon"}},
		{"models without aliases", []string{"keys", "models", "k"}},
		{"models with aliases and --all", []string{"keys", "models", "k", "a", "--all"}},
		{"apply without file", []string{"apply"}},
		{"bad admin URL", []string{"status", "--admin", "127.0.0.1:8081"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := h.runCLI(t, tt.args...)
			if code != 2 || out != "" || errOut == "" {
				t.Errorf("RunCLI(%q) = %d, stdout %q, stderr %q; want exit 2 with a message on stderr", tt.args, code, out, errOut)
			}
		})
	}
}

func TestCLIToken(t *testing.T) {
	h := newHarness(t)
	var out, errOut bytes.Buffer
	noToken := func(k string) string {
		if k == adminclient.EnvAdminURL {
			return h.url
		}
		return ""
	}
	if code := adminclient.RunCLI(t.Context(), []string{"keys", "list"}, &out, &errOut, noToken); code != 2 || !strings.Contains(errOut.String(), adminclient.EnvAdminToken) {
		t.Errorf("keys list without a token = %d, stderr %q; want exit 2 naming %s", code, errOut.String(), adminclient.EnvAdminToken)
	}

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := adminclient.RunCLI(t.Context(), []string{"keys", "list", "--token-file", file}, &out, &errOut, noToken); code != 0 {
		t.Errorf("keys list --token-file = %d, stderr %q; want 0", code, errOut.String())
	}

	code, _, errOut2 := h.runCLI(t, "status", "--token-file", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || errOut2 == "" {
		t.Errorf("status with a missing token file = %d %q; want exit 1", code, errOut2)
	}

	wrong := func(k string) string {
		return map[string]string{adminclient.EnvAdminURL: h.url, adminclient.EnvAdminToken: "wrong"}[k]
	}
	errOut.Reset()
	if code := adminclient.RunCLI(t.Context(), []string{"status"}, &out, &errOut, wrong); code != 1 || !strings.Contains(errOut.String(), "admin_unauthorized") {
		t.Errorf("status with a wrong token = %d, stderr %q; want exit 1, admin_unauthorized", code, errOut.String())
	}
}

func TestCLIKeySettings(t *testing.T) {
	h := newHarness(t)
	code, _, errOut := h.runCLI(t, "keys", "create", "--name", "full", "--tenant", "web", "--id", "full",
		"--labels", "team=search,env=prod", "--policy", "preferred", "--accounts", "org-1", "--fallback", "any", "--wait", "2s",
		"--limits", "rpm=60,tpm=6000,max_inflight=2,daily_tokens=100000", "--user-limits", "rpm=6,max_inflight=1",
		"--task", "chat", "--tasks", "batch", "--paths", "chat", "--service-tiers", "flex", "--on-limit", "refuse", "--assert", "user,profile",
		"--trace-content", "true")
	if code != 0 {
		t.Fatalf("keys create exit = %d, stderr %q", code, errOut)
	}
	k, err := h.client.Key(t.Context(), "full")
	if err != nil {
		t.Fatal(err)
	}
	want := everySetting
	want.Labels = map[string]string{"team": "search", "env": "prod"}
	if diff := cmp.Diff(want, k.KeySettings); diff != "" {
		t.Errorf("settings after keys create (-want +got):\n%s", diff)
	}

	code, out, errOut := h.runCLI(t, "keys", "update", "full", "--limits", "", "--paths", "chat,embeddings", "--name", "renamed")
	if code != 0 {
		t.Fatalf("keys update exit = %d, stderr %q", code, errOut)
	}
	for _, line := range []string{"Name:", "renamed", "Paths:", "chat, embeddings", "Labels:", "env=prod, team=search", "On limit:", "refuse"} {
		if !strings.Contains(out, line) {
			t.Errorf("keys update output lacks %q:\n%s", line, out)
		}
	}
	if k, _ := h.client.Key(t.Context(), "full"); k.Limits != (admin.KeyLimits{}) || k.UserLimits.RPM != 6 || k.Policy.Mode != "preferred" {
		t.Errorf("after keys update: limits %+v, user limits %+v, policy %+v; want limits cleared, the rest kept", k.Limits, k.UserLimits, k.Policy)
	}
	if code, _, errOut := h.runCLI(t, "keys", "update", "full"); code != 2 || !strings.Contains(errOut, "nothing to change") {
		t.Errorf("keys update with no field = %d, %q; want a usage error", code, errOut)
	}
	if code, _, errOut := h.runCLI(t, "keys", "update", "full", "--limits", "rpm"); code != 2 || !strings.Contains(errOut, "--limits") {
		t.Errorf("keys update --limits rpm = %d, %q; want a usage error naming --limits", code, errOut)
	}
	if code, _, errOut := h.runCLI(t, "keys", "update", "full", "--trace-content", "maybe"); code != 2 || !strings.Contains(errOut, "--trace-content") {
		t.Errorf("keys update --trace-content maybe = %d, %q; want a usage error naming --trace-content", code, errOut)
	}
	if code, _, errOut := h.runCLI(t, "keys", "update", "full", "--trace-content", "false"); code != 0 {
		t.Errorf("keys update --trace-content false = %d, %q", code, errOut)
	}
	if k, _ := h.client.Key(t.Context(), "full"); k.TraceContent {
		t.Error("trace_content still on after keys update --trace-content false")
	}
}
