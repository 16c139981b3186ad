package importer_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/importer"
)

func importNewAPI(t *testing.T) *importer.Result {
	t.Helper()
	res, err := importer.NewAPI(readFixture(t, "newapi/channels.json"), readFixture(t, "newapi/tokens.json"), "secrets")
	if err != nil {
		t.Fatalf("NewAPI: %v", err)
	}
	return res
}

func TestNewAPIGolden(t *testing.T) {
	res := importNewAPI(t)
	golden(t, "newapi/catalog.golden.yaml", res.Catalog)
	golden(t, "newapi/report.golden.md", []byte(res.Report.String()))
}

// TestNewAPICatalogValidates writes the secret files the import returns and
// loads the catalog as `sluice check` does; no key of the export is in the
// catalog or the report.
func TestNewAPICatalogValidates(t *testing.T) {
	res := importNewAPI(t)
	dir := t.TempDir()
	catalog := bytes.ReplaceAll(res.Catalog, []byte("secret_file: secrets/"), []byte("secret_file: "+dir+"/"))
	for path, secret := range res.SecretFiles {
		if bytes.Contains(res.Catalog, secret) || strings.Contains(res.Report.String(), string(secret)) {
			t.Errorf("the secret of %s is written out", path)
		}
		if err := os.WriteFile(dir+"/"+strings.TrimPrefix(path, "secrets/"), secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Load(catalog, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("imported catalog is invalid: %v\n%s", err, catalog)
	}
	if len(c.Models) < 10 || len(c.Credentials) != 12 {
		t.Errorf("imported %d aliases and %d credentials, want 10 or more and one per key line of the enabled channels it imports (12)", len(c.Models), len(c.Credentials))
	}
	if got := string(res.SecretFiles["secrets/key-web"]); got != "sk-Fx7tokenWebAbcdefghijklmnop0123456789" {
		t.Errorf("token web keeps secret %q, want its key with the sk- prefix", got)
	}
}

func TestNewAPIReportsEveryField(t *testing.T) {
	notMapped := map[string]bool{}
	for _, l := range importNewAPI(t).Report.NotMapped {
		notMapped[l.Field] = true
	}
	for _, field := range []string{
		"channels[0].auto_ban", "channels[0].balance", "channels[0].used_quota", "channels[0].created_time",
		"channels[3].tag", "channels[4].other", "channels[6].status_code_mapping", "channels[7]", "channels[8]", "channels[9]",
		"channels[10].test_model", "tokens[0].remain_quota", "tokens[0].allow_ips", "tokens[0].model_limits", "tokens[0].user_id", "tokens[2]",
	} {
		if !notMapped[field] {
			t.Errorf("%s is not reported as not mapped", field)
		}
	}
}

func TestNewAPIMalformedInputNamesTheField(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`[{"id": 1, "type": 1, "status": 1, "key": "k", "models": "a", "model_mapping": "{not json"}]`, "channels: channels[0].model_mapping: must be a JSON object"},
		{`[{"id": 1, "type": 3, "status": 1, "key": "k", "models": "a", "base_url": "https://r.openai.azure.com"}]`, "channels: channels[0].other: the Azure API version is required"},
		{`[{"id": 1, "type": 1, "status": 1, "key": "", "models": "a"}]`, "channels: channels[0].key: has no key"},
		{`[{"id": 1, "type": 1, "status": 1, "key": "k", "models": "a", "priority": "high"}]`, "channels: channels[0].priority: must be a number"},
		{`{"data": 3}`, "channels: must be a list"},
	} {
		_, err := importer.NewAPI([]byte(tc.doc), nil, "s")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
}

// TestNewAPIDisabledChannelsAreListed checks that each disabled channel is
// named in the report as not imported because new-api has it disabled.
func TestNewAPIDisabledChannelsAreListed(t *testing.T) {
	notes := map[string]string{}
	for _, l := range importNewAPI(t).Report.NotMapped {
		notes[l.Field] = l.Note
	}
	for field, want := range map[string]string{
		"channels[7]": "not imported: disabled in new-api (status 2, disabled by hand)",
		"channels[8]": "not imported: disabled in new-api (status 3, disabled automatically after failures)",
	} {
		if !strings.HasPrefix(notes[field], want) {
			t.Errorf("%s: %q, want it to start %q", field, notes[field], want)
		}
	}
}
