package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// loadFull loads testdata/full.yaml with its secrets in place: environment
// variables from a fake environment, and secret files in a temporary
// directory instead of /run/secrets.
func loadFull(t *testing.T) *Catalog {
	t.Helper()
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "openai-k2", "sk-openai-file-0002\n")
	writeFile(t, dir, "acme-own-openai", "sk-acme-own-0001\n")
	writeFile(t, dir, "acme-bob-openai", "sk-acme-bob-0001\n")
	writeFile(t, dir, "sluice-key-reports", "sk-sluice-reports-0001\n")
	writeFile(t, dir, "admin-deploy", "admin-deploy-0001\n")
	writeFile(t, dir, "redis-url", "redis://:redis-password@127.0.0.1:6379/0\n")
	writeFile(t, dir, "claude-max-1", "refresh-token-0001\n")
	writeFile(t, dir, "codex-login-1", "refresh-token-0002\n")
	writeFile(t, dir, "aws-secret-access-key", "aws-secret-0001\n")
	writeFile(t, dir, "entra-client-secret", "entra-secret-0001\n")
	writeFile(t, dir, "gemini-cli-1", "1//gemini-cli-refresh-0001\n")
	writeFile(t, dir, "gemini-cli-client-secret", "gemini-cli-secret-0001\n")
	writeFile(t, dir, "vertex-sa.json", testServiceAccount(t))
	data = []byte(strings.ReplaceAll(string(data), "/run/secrets", dir))
	env := lookup(map[string]string{
		"SLUICE_ADMIN_TOKEN":     "admin-token-0001",
		"SLUICE_ADMIN_DASHBOARD": "admin-dashboard-0001",
		"OPENAI_KEY_1":           "sk-openai-env-0001",
		"ANTHROPIC_KEY_1":        "sk-ant-env-0001",
		"GEMINI_KEY_1":           "gemini-env-0001",
		"AWS_ACCESS_KEY_ID":      "AKIDFULLEXAMPLE",
		"AWS_SESSION_TOKEN":      "aws-session-token-0001",
		"AZURE_OPENAI_KEY_1":     "azure-key-0001",
		"SLUICE_KEY_WEB":         "sk-sluice-web-0001",
		"SLUICE_KEY_PARTNER":     "sk-sluice-partner-0001",
		"SLUICE_KEY_AUDIT":       "sk-sluice-audit-0001",
		"SLUICE_DATABASE_URL":    "postgres://sluice:db-password@127.0.0.1:5432/sluice?sslmode=disable",
		"SLUICE_SECRET_KEY":      "c2x1aWNlLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctISE=",
		"SLUICE_NATS_TOKEN":      "nats-token-0001",
		"SLUICE_REPORTING_URL":   "postgres://reports:reports-password@127.0.0.1:5432/reports?sslmode=disable",
		"OTLP_AUTH":              "Bearer otlp-token-0001",
	})
	c, err := Load(data, env)
	if err != nil {
		t.Fatalf("Load(testdata/full.yaml) = %v", err)
	}
	return c
}

func TestFullExample(t *testing.T) {
	c := loadFull(t)

	// The example documents every field, as written rather than defaulted: a
	// field added to the schema must be added there too.
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	written, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// Of the fields that are alternatives to one another, the example sets
	// one and names the others in a comment.
	alternatives := map[string]bool{
		"database.url": true, "database.url_file": true, "state.redis.url": true, "state.redis.url_env": true,
		"server.secret_key_file": true, "credentials.oauth.client_secret_env": true,
		"events.nats.creds_file": true, "events.consumer.url": true, "events.consumer.url_file": true,
	}
	var unset []string
	for path, set := range fieldsSet(reflect.ValueOf(*written), "") {
		if !set && !alternatives[path] {
			unset = append(unset, path)
		}
	}
	slices.Sort(unset)
	if len(unset) > 0 {
		t.Errorf("testdata/full.yaml never sets %v", unset)
	}

	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Marshal(full)) = %v", err)
	}
	if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-loaded +again):\n%s", diff)
	}
}

func TestFullExampleSecretsOutsideTheFile(t *testing.T) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "sk-") {
		t.Error("testdata/full.yaml holds something that looks like a secret; use secret_env or secret_file")
	}
}

// fieldsSet reports, for every leaf field path of v (slice elements share a
// path), whether any occurrence holds a non-zero value.
func fieldsSet(v reflect.Value, path string) map[string]bool {
	set := make(map[string]bool)
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
				if opts == "inline" {
					walk(v.Field(i), path) // its fields are the record's own
					continue
				}
				walk(v.Field(i), strings.TrimPrefix(path+"."+name, "."))
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Struct {
				set[path] = set[path] || v.Len() > 0
				return
			}
			if v.Len() == 0 {
				walk(reflect.New(v.Type().Elem()).Elem(), path) // record the paths as unset
			}
			for i := range v.Len() {
				walk(v.Index(i), path)
			}
		default:
			set[path] = set[path] || !v.IsZero()
		}
	}
	walk(v, path)
	return set
}
