package importer_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/importer"
)

// A Gemini CLI login's prefix puts its prefixed aliases on a Code Assist
// endpoint of its own; an older file's refresh token at the top is read;
// a login without a project is reported, not imported.
func TestCLIProxyAPIGeminiCLILogins(t *testing.T) {
	res, err := importer.CLIProxyAPI([]byte("debug: false"), map[string][]byte{
		"a.json": []byte(`{"type": "gemini", "email": "a@example.com", "project_id": "p-1", "prefix": "team", "refresh_token": "1//FAKE-top"}`),
		"b.json": []byte(`{"type": "gemini", "email": "b@example.com", "token": {"refresh_token": "1//FAKE-b"}}`),
	}, "secrets")
	if err != nil {
		t.Fatal(err)
	}
	catalog := string(res.Catalog)
	for _, want := range []string{
		"- id: code-assist-p-1-team\n    base_url: https://cloudcode-pa.googleapis.com\n    protocols: [gemini.generate]\n    code_assist: {project: p-1}",
		"alias: team/gemini-2.5-pro", "endpoints: [code-assist-p-1-team]", "account: gemini-cli-p-1",
	} {
		if !strings.Contains(catalog, want) {
			t.Errorf("catalog lacks %q:\n%s", want, catalog)
		}
	}
	if got := string(res.SecretFiles["secrets/gemini-cli-a-example.com-refresh-token"]); got != "1//FAKE-top" {
		t.Errorf("a's refresh token file holds %q, want the file's top-level refresh_token", got)
	}
	if strings.Contains(catalog, "b-example.com") {
		t.Errorf("b's login, without a project, was imported:\n%s", catalog)
	}
	if !strings.Contains(res.Report.String(), "`auth/b.json`: not imported: a Gemini CLI login without a project_id") {
		t.Errorf("b's login is not reported as not imported:\n%s", res.Report.String())
	}
}
