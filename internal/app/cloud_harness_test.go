package app_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// Credentials of the clouds' test catalog.
const (
	azureKey      = "azure-resource-KEY-3e8a1f0c"
	entraClientID = "entra-app-1"
	entraSecret   = "entra-client-SECRET-9b2d7c4e"
	serviceEmail  = "sluice@proj-1.iam.gserviceaccount.com"
)

// cloudCatalog has an Azure OpenAI resource reached with its key (ep-azure)
// and with an Entra ID application's tokens (ep-azure-entra), and a
// Vertex AI project reached with a service account's tokens (ep-vertex
// for Gemini, ep-vertex-claude for Claude: one endpoint per publisher, so
// a chat alias's edge speaks the model's protocol),
// all on one simulator (%[2]s); %[1]s is the test's directory.
const cloudCatalog = tokenKeepingServer + `endpoints:
  - {id: ep-azure, base_url: %[2]s, protocols: [openai.chat, openai.embeddings], azure: {api_version: 2024-10-21}}
  - {id: ep-azure-entra, base_url: %[2]s/openai, protocols: [openai.chat], azure: {api_version: 2024-10-21}}
  - {id: ep-vertex, base_url: %[2]s/v1, protocols: [gemini.generate], vertex: {project: proj-1, location: us-east5}}
  - {id: ep-vertex-claude, base_url: %[2]s, protocols: [anthropic.messages], vertex: {project: proj-1, location: us-east5}}
credentials:
  - {id: cred-azure, secret_env: AZURE_KEY, endpoints: [ep-azure]}
  - id: cred-entra
    oauth: {grant: client_credentials, token_url: %[2]s/oauth/token, client_id: ` + entraClientID + `, client_secret_env: ENTRA_SECRET, scopes: [https://cognitiveservices.azure.com/.default]}
    endpoints: [ep-azure-entra]
  - id: cred-vertex
    oauth: {grant: jwt_bearer, service_account_file: %[1]s/sa.json, scopes: [https://www.googleapis.com/auth/cloud-platform]}
    endpoints: [ep-vertex, ep-vertex-claude]
models:
  - alias: azure-gpt
    deployments: [{model: my-gpt-4o, endpoints: [ep-azure]}]
  - alias: azure-embed
    protocol: openai.embeddings
    deployments: [{model: my-embedding, endpoints: [ep-azure]}]
  - alias: entra-gpt
    deployments: [{model: my-gpt-4o, endpoints: [ep-azure-entra]}]
  - alias: claude-vertex
    protocol: anthropic.messages
    deployments: [{model: claude-sonnet-4@20250514, endpoints: [ep-vertex-claude]}]
  - alias: gpt-on-claude-vertex
    deployments: [{model: claude-sonnet-4@20250514, endpoints: [ep-vertex-claude]}]
  - alias: gem-vertex
    protocol: gemini.generate
    deployments: [{model: gemini-2.5-flash, endpoints: [ep-vertex]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// cloudGateway is a gateway in front of the clouds of cloudCatalog.
type cloudGateway struct {
	*harness
	sim *simulator.Simulator
}

func startCloudGateway(t *testing.T) *cloudGateway {
	t.Helper()
	env := map[string]string{"AZURE_KEY": azureKey, "ENTRA_SECRET": entraSecret}
	h, sim := startSimulatedCloud(t, cloudCatalog, func(sim *simulator.Simulator, simURL string) map[string]string {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		sa, _ := json.Marshal(map[string]string{
			"type": "service_account", "project_id": "proj-1", "private_key_id": "kid-1", "client_email": serviceEmail,
			"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": simURL + simulator.OAuthTokenPath,
		})
		sim.RegisterServiceAccount(serviceEmail, &key.PublicKey, simulator.Behavior{}, 0)
		sim.RegisterClient(entraClientID, entraSecret, simulator.Behavior{}, 0)
		sim.SetKey(azureKey, simulator.Behavior{})
		return map[string]string{"sa.json": string(sa)}
	}, map[string]string{
		"/v1beta/models/gem-vertex:generateContent": `{"contents":[{"parts":[{"text":"hi"}]}]}`,
		"/v1/chat/completions":                      `{"model":"entra-gpt","messages":[{"role":"user","content":"hi"}]}`,
	}, func(o *app.Options) {
		o.LookupEnv = func(k string) (string, bool) {
			if v, ok := env[k]; ok {
				return v, true
			}
			v, ok := testEnv[k]
			return v, ok
		}
	})
	return &cloudGateway{harness: h, sim: sim}
}

// startSimulatedCloud starts a gateway, changed by opts, on catalog in
// front of a new simulator; %[1]s in catalog is the test's directory,
// %[2]s the simulator's URL. setup, given the URL, tells the simulator
// what the catalog's credentials need and returns the files they read
// (name → content) for the directory, beside the secret key and the
// catalog. The oauth credentials serve once their first tokens are in,
// which the token manager obtains in the background after the start: it
// returns once each of firstCalls (path → body) has answered 200.
func startSimulatedCloud(t *testing.T, catalog string, setup func(sim *simulator.Simulator, simURL string) map[string]string,
	firstCalls map[string]string, opts ...func(*app.Options)) (*harness, *simulator.Simulator) {
	t.Helper()
	h, sim := &harness{t: t, logs: &syncBuffer{}}, simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	dir := t.TempDir()
	files := setup(sim, srv.URL)
	files["secret-key"], files["catalog.yaml"] = testSecretKey, fmt.Sprintf(catalog, dir, srv.URL)
	writeFiles(t, dir, files)
	h.cfgPath, h.dbPath = filepath.Join(dir, "catalog.yaml"), filepath.Join(dir, "sluice.db")
	h.startGateway(opts...)
	for path, body := range firstCalls {
		eventually(t, 5*time.Second, "a first token for "+path, func() bool {
			status, _, _ := h.post(t.Context(), path, keyWeb, body)
			return status == http.StatusOK
		})
	}
	return h, sim
}

// lastHosted is the last request the simulator got on a cloud's path.
func (g *cloudGateway) lastHosted() simulator.HostedRequest {
	g.t.Helper()
	reqs := g.sim.HostedRequests()
	if len(reqs) == 0 {
		g.t.Fatal("no request reached a cloud's path")
	}
	return reqs[len(reqs)-1]
}
