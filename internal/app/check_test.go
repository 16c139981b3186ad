package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckListsEveryProblem(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "version: 1\nmodels:\n  - alias: x\n    deployments: [{model: m, endpoints: [nope], weight: -1}]\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := Run(context.Background(), []string{"check", "--config", bad}, &out, &errs); code != 1 {
		t.Fatalf("check of an invalid catalog = exit %d, want 1; stderr %s", code, errs.String())
	}
	for _, want := range []string{`models[0].deployments[0].endpoints[0]: unknown endpoint "nope"`, "models[0].deployments[0].weight: must be > 0"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs.String())
		}
	}
}

func TestCheckPassesAValidCatalog(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.yaml")
	doc := `version: 1
endpoints: [{id: sim, base_url: "http://127.0.0.1:9", protocols: [openai.chat]}]
accounts: [{id: a, max_inflight: 4}]
credentials: [{id: c, account: a, secret_env: CHECK_TEST_KEY, endpoints: [sim]}]
models: [{alias: demo, deployments: [{model: m, endpoints: [sim]}]}]
`
	if err := os.WriteFile(good, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHECK_TEST_KEY", "sk-test")
	var out, errs bytes.Buffer
	if code := Run(context.Background(), []string{"check", "--config", good}, &out, &errs); code != 0 {
		t.Fatalf("check = exit %d, want 0; stderr %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "valid (1 models") {
		t.Errorf("stdout = %q", out.String())
	}
	// The same catalog where its secret is not set is invalid here.
	os.Unsetenv("CHECK_TEST_KEY")
	errs.Reset()
	if code := Run(context.Background(), []string{"check", "--config", good}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "CHECK_TEST_KEY") {
		t.Errorf("check without the secret = exit %d, stderr %s; want 1 naming CHECK_TEST_KEY", code, errs.String())
	}
}
