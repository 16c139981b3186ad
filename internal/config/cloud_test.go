package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
)

// testServiceAccount is a Google service account's JSON key.
func testServiceAccount(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com", "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": "https://oauth2.googleapis.com/token",
	})
	return string(b)
}

func TestCloudEndpointsAndGrants(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sa.json", testServiceAccount(t))
	writeFile(t, dir, "bad.json", `{"type":"authorized_user"}`)
	writeFile(t, dir, "rt", "1//refresh-token\n")
	writeFile(t, dir, "cs", "client-secret\n")
	base := `version: 1
database: {url: "sqlite://:memory:"}
endpoints:
  - {id: az, base_url: https://r.openai.azure.com, protocols: [openai.chat], azure: {api_version: 2024-10-21}}
  - {id: vx, base_url: https://us-east5-aiplatform.googleapis.com, protocols: [anthropic.messages], vertex: {project: p, location: us-east5}}
  - {id: ca, base_url: https://cloudcode-pa.googleapis.com, protocols: [gemini.generate], code_assist: {project: proj-1}}
credentials:
  - {id: gca, endpoints: [ca], oauth: {token_url: https://oauth2.googleapis.com/token, client_id: cid, refresh_token_file: DIR/rt, client_secret_file: DIR/cs}}
  - {id: sa, endpoints: [vx], oauth: {grant: jwt_bearer, service_account_file: DIR/sa.json, scopes: [https://www.googleapis.com/auth/cloud-platform]}}
  - {id: entra, endpoints: [az], oauth: {grant: client_credentials, token_url: https://login.example.com/t/token, client_id: c, client_secret_env: SECRET}}
models:
  - {alias: m, deployments: [{model: d, endpoints: [az]}]}
`
	env := lookup(map[string]string{"SECRET": "s"})
	load := func(doc string) error {
		_, err := Load([]byte(strings.ReplaceAll(doc, "DIR", dir)), env)
		return err
	}
	if err := load(base); err != nil {
		t.Fatalf("valid cloud catalog: %v", err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"protocols: [openai.chat], azure", "protocols: [gemini.generate], azure", "azure does not host gemini.generate"},
		{"azure: {api_version: 2024-10-21}", "azure: {api_version: \"\"}", "azure.api_version: required"},
		{"vertex: {project: p, location: us-east5}", "vertex: {project: p/x, location: us-east5}", "vertex.project: must be letters"},
		{"location: us-east5}}", "location: us-east5}, azure: {api_version: v}}", "set only one of azure, vertex, bedrock, code_assist and chatgpt"},
		{"DIR/sa.json", "DIR/bad.json", `"type" is not service_account`},
		{"scopes: [https://www.googleapis.com/auth/cloud-platform]", "client_id: x", "oauth.scopes: required for grant jwt_bearer"},
		{"client_secret_env: SECRET", "refresh_token_file: DIR/sa.json", "client_secret_env: required"},
		{"grant: client_credentials", "grant: password", "oauth.grant: must be"},
		{"code_assist: {project: proj-1}", "code_assist: {project: \"\"}", "code_assist.project: required"},
		{"protocols: [gemini.generate], code_assist", "protocols: [anthropic.messages], code_assist", "code_assist does not host anthropic.messages"},
		{"code_assist: {project: proj-1}", "code_assist: {project: proj-1}, vertex: {project: p, location: l}", "set only one of azure, vertex, bedrock, code_assist and chatgpt"},
		{"client_secret_file: DIR/cs", "client_secret_file: DIR/missing", "client_secret_file"},
		{"client_secret_file: DIR/cs", "client_secret_file: DIR/cs, client_secret_env: SECRET", "set only one of client_secret_env and client_secret_file"},
	} {
		err := load(strings.Replace(base, tt.from, tt.to, 1))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s → %s: %v, want %q", tt.from, tt.to, err, tt.want)
		}
	}
}
