package admin_test

import (
	"strings"
	"testing"
)

func TestCLIBatchDryRunPrintsTheChangeItMakes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in the output
	}{
		{"Disable", []string{"keys", "disable", "--selector", "team=web"},
			[]string{`web-1  status:  "active"  →  "disabled"`, "already so: web-2", "cat-1  declared in the catalog", "web-3  key web-3 is revoked"}},
		{"SetLimits", []string{"keys", "set-limits", "--selector=team=web,env=prod", "--limits", "rpm=60"},
			[]string{"web-1  limits:", `"rpm":60`}},
		{"SetPolicy", []string{"keys", "set-policy", "--selector", "team notin (api)", "--policy", "pool", "--pool", "background"},
			[]string{"web-1  policy:", `"pool":"background"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := batchHarness(t)
			code, dry, errOut := h.runCLI(t, append(tt.args, "--dry-run")...)
			if code != 0 {
				t.Fatalf("%v --dry-run exit = %d, stderr %q", tt.args, code, errOut)
			}
			code, applied, errOut := h.runCLI(t, tt.args...)
			if code != 0 {
				t.Fatalf("%v exit = %d, stderr %q", tt.args, code, errOut)
			}
			dryHead, dryBody, _ := strings.Cut(dry, "\n")
			head, body, _ := strings.Cut(applied, "\n")
			if !strings.Contains(dryHead, "would change (dry run; nothing was changed)") || strings.Contains(head, "dry run") {
				t.Errorf("first lines = %q, %q; want the dry run to say so", dryHead, head)
			}
			if dryBody != body {
				t.Errorf("the dry run printed\n%s\nthe run printed\n%s", dryBody, body)
			}
			for _, want := range tt.want {
				if !strings.Contains(body, want) {
					t.Errorf("output lacks %q:\n%s", want, applied)
				}
			}
		})
	}
}

func TestCLIBatchUsage(t *testing.T) {
	h := batchHarness(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"keys", "set-limits", "--limits", "rpm=1"}, "--selector is required"},
		{[]string{"keys", "set-policy", "--selector", "team=web", "--limits", "rpm=1"}, "takes the flags"},
		{[]string{"keys", "set-limits", "--selector", "team=web", "--policy", "default"}, "takes the flags"},
		{[]string{"keys", "disable", "--selector", "team in (web", "--dry-run"}, "'(' without ')'"},
	}
	for _, tt := range tests {
		code, _, errOut := h.runCLI(t, tt.args...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v = exit %d, stderr %q; want it to fail with %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestCLIAudit(t *testing.T) {
	h := batchHarness(t)
	if code, _, errOut := h.runCLI(t, "keys", "disable", "web-1"); code != 0 {
		t.Fatalf("keys disable exit = %d, %s", code, errOut)
	}
	code, out, errOut := h.runCLI(t, "audit", "--target", "web-1", "--limit", "1")
	if code != 0 {
		t.Fatalf("audit exit = %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("audit = %q, want a header and a row", out)
	}
	for _, want := range []string{"admin", "127.0.0.1", "keys.disable", "web-1", "200"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("audit row %q lacks %q", lines[1], want)
		}
	}
}
