package importer_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/importer"
)

var update = flag.Bool("update", false, "rewrite the golden files from the importer's output")

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func importLiteLLM(t *testing.T) *importer.Result {
	t.Helper()
	res, err := importer.LiteLLM(readFixture(t, "litellm/config.yaml"), readFixture(t, "litellm/keys.json"), readFixture(t, "litellm/teams.json"))
	if err != nil {
		t.Fatalf("LiteLLM: %v", err)
	}
	return res
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the importer's output (run with -update and review the diff):\n%s", path, got)
	}
}

func TestLiteLLMGolden(t *testing.T) {
	res := importLiteLLM(t)
	golden(t, "litellm/catalog.golden.yaml", res.Catalog)
	golden(t, "litellm/report.golden.md", []byte(res.Report.String()))
}

// TestLiteLLMCatalogValidates loads the import as `sluice check` does,
// with exactly the environment variables the report lists set: a secret
// the catalog reads but the report forgets fails here.
func TestLiteLLMCatalogValidates(t *testing.T) {
	res := importLiteLLM(t)
	listed := map[string]bool{}
	for _, s := range res.Report.Secrets {
		listed[s.Env] = true
	}
	lookup := func(name string) (string, bool) {
		if listed[name] {
			return "secret-of-" + name, true
		}
		return "", false
	}
	c, err := config.Load(res.Catalog, lookup)
	if err != nil {
		t.Fatalf("imported catalog is invalid: %v\n%s", err, res.Catalog)
	}
	if len(c.Models) < 10 {
		t.Errorf("imported %d aliases, want the fixture's 10 or more", len(c.Models))
	}
}

// TestLiteLLMNeverWritesLiteralSecrets: the fixture's literal api_key
// reaches neither the catalog nor the report; an env var stands for it.
func TestLiteLLMNeverWritesLiteralSecrets(t *testing.T) {
	res := importLiteLLM(t)
	const literal = "sk-literal-vllm-do-not-copy-1234"
	if !bytes.Contains(readFixture(t, "litellm/config.yaml"), []byte(literal)) {
		t.Fatal("the fixture no longer has the literal key this test looks for")
	}
	if bytes.Contains(res.Catalog, []byte(literal)) || strings.Contains(res.Report.String(), literal) {
		t.Fatal("a literal api_key was written out")
	}
	if !strings.Contains(res.Report.String(), "IMPORTED_OPENAI_VLLM_KEY_1") {
		t.Errorf("the report does not name the variable standing for the literal key:\n%s", res.Report.String())
	}
}

// TestLiteLLMReportsEveryField: each field of the fixture the importer
// does not carry appears under Not mapped.
func TestLiteLLMReportsEveryField(t *testing.T) {
	report := importLiteLLM(t).Report
	notMapped := map[string]bool{}
	for _, l := range report.NotMapped {
		notMapped[l.Field] = true
	}
	for _, field := range []string{
		"model_list[0].model_info.id", "model_list[0].model_info.base_model", "model_list[4].litellm_params.timeout",
		"model_list[8].litellm_params.max_retries", "model_list[11].litellm_params.stream_timeout", "model_list[12]",
		"model_list[13]", "router_settings.context_window_fallbacks", "router_settings.num_retries",
		"router_settings.redis_host", "litellm_settings.drop_params", "litellm_settings.success_callback",
		"general_settings.database_url", "general_settings.alerting", "environment_variables",
		"keys[0].max_budget", "keys[0].budget_duration", "keys[0].spend", "keys[0].metadata.tags", "keys[0].user_id",
		"keys[0].created_at", "keys[1]", "keys[2].metadata.cost center", "teams[0].max_budget", "teams[0].members_with_roles", "teams[0].metadata",
	} {
		if !notMapped[field] {
			t.Errorf("%s is not reported as not mapped", field)
		}
	}
}

func TestLiteLLMMalformedInputNamesTheField(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"model_list: [{model_name: a, litellm_params: {model: openai/x, rpm: lots}}]", "model_list[0].litellm_params.rpm: must be a number"},
		{"model_list: [{litellm_params: {model: openai/x}}]", "model_list[0].model_name: is required"},
		{"model_list: [{model_name: a, litellm_params: {model: azure/x, api_key: os.environ/K}}]", "model_list[0].litellm_params.api_base: is required"},
		{"model_list: [{model_name: a, litellm_params: {model: openai/x}}]\nrouter_settings: {routing_strategy: psychic}", "router_settings.routing_strategy: unknown strategy"},
		{"model_list: {}", "model_list: must be a list"},
	} {
		_, err := importer.LiteLLM([]byte(tc.doc), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
	_, err := importer.LiteLLM([]byte("model_list: [{model_name: a, litellm_params: {model: openai/x}}]"), []byte(`{"keys": [{"token": "t", "rpm_limit": -1}]}`), nil)
	if err == nil || !strings.Contains(err.Error(), "keys: keys[0].rpm_limit: must be a whole number") {
		t.Errorf("a negative rpm_limit: got %v", err)
	}
}

// TestLiteLLMSimpleShuffleWeighsByRPM: without weights, LiteLLM's default
// strategy shares a model's traffic by its deployments' rpm; so do the
// imported weights.
func TestLiteLLMSimpleShuffleWeighsByRPM(t *testing.T) {
	res, err := importer.LiteLLM([]byte(`model_list:
  - {model_name: m, litellm_params: {model: openai/gpt-4o, api_key: os.environ/K1, rpm: 100}}
  - {model_name: m, litellm_params: {model: azure/gpt-4o, api_base: "https://r.openai.azure.com", api_version: "2024-10-21", api_key: os.environ/K2, rpm: 300}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := config.Decode(res.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	m := cat.Models[0]
	if m.Strategy != "weighted" || m.Deployments[0].Weight != 1 || m.Deployments[1].Weight != 3 {
		t.Errorf("got strategy %q, deployments %+v; want weighted 1:3", m.Strategy, m.Deployments)
	}
}
