package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/simulator"
)

// cloudSpecs are a Google service account's (jwt_bearer) and an Entra ID
// application's (client_credentials) credentials at w's token endpoint.
func cloudSpecs(t *testing.T, w *world) []Spec {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com", "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": w.url + simulator.OAuthTokenPath,
	})
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	w.sim.RegisterServiceAccount("sa@p.iam.gserviceaccount.com", &key.PublicKey, simulator.Behavior{}, time.Hour)
	w.sim.RegisterClient("app-1", "app-secret", simulator.Behavior{}, time.Hour)
	return []Spec{
		{CredentialID: "vertex-1", OAuth: config.OAuth{Grant: config.GrantJWTBearer, ServiceAccountFile: file, Scopes: []string{simulator.CloudScope}}},
		{CredentialID: "entra-1", OAuth: config.OAuth{Grant: config.GrantClientCredentials, TokenURL: w.url + simulator.OAuthTokenPath,
			ClientID: "app-1", ClientSecretEnv: "APP_SECRET", Scopes: []string{"https://cognitiveservices.azure.com/.default"}}},
	}
}

// Two replicas on one database obtain each cloud credential's token once
// per expiry: the jwt_bearer and client_credentials grants share the
// refresh_token grant's row, lock and refresh margin.
func TestCloudGrantsOncePerExpiryAcrossReplicas(t *testing.T) {
	w := newWorld(t)
	specs := cloudSpecs(t, w)
	path := filepath.Join(t.TempDir(), "oauth.db")
	managers := make([]*Manager, 2)
	for i := range managers {
		m, err := New(Options{
			DB: sqliteFile(t, path), Key: testKey, Now: w.clock.Now, Log: slog.New(slog.NewJSONHandler(w.logs, nil)),
			LookupEnv: func(name string) (string, bool) { return "app-secret", name == "APP_SECRET" },
		})
		if err != nil {
			t.Fatal(err)
		}
		m.Sync(t.Context(), specs)
		managers[i] = m
	}
	for round := range 3 {
		var wg sync.WaitGroup
		for _, m := range managers {
			wg.Go(func() { m.Tick(t.Context()) })
		}
		wg.Wait()
		if n := w.sim.CloudTokensIssued(); n != 2*(round+1) {
			t.Fatalf("round %d: %d tokens issued, want %d (one per credential per expiry)", round, n, 2*(round+1))
		}
		for _, sp := range specs {
			a, okA := managers[0].Source(sp.CredentialID).Token()
			b, okB := managers[1].Source(sp.CredentialID).Token()
			if !okA || !okB || a != b {
				t.Fatalf("round %d: %s: replicas hold %q and %q", round, sp.CredentialID, a, b)
			}
		}
		w.clock.Add(56 * time.Minute) // within the refresh margin (6 minutes of an hour), before expiry
	}
}

// A service account the token endpoint does not know (its key deleted)
// and a wrong client secret disable their credentials.
func TestCloudGrantRefusedDisables(t *testing.T) {
	w := newWorld(t)
	specs := cloudSpecs(t, w)
	w.sim.RegisterServiceAccount("sa@p.iam.gserviceaccount.com", nil, simulator.Behavior{}, time.Hour) // the key deleted
	m, err := New(Options{
		DB: sqliteFile(t, filepath.Join(t.TempDir(), "oauth.db")), Key: testKey, Now: w.clock.Now, Log: slog.New(slog.NewJSONHandler(w.logs, nil)),
		LookupEnv: func(name string) (string, bool) { return "wrong", true },
		Disable: func(_ context.Context, id, _ string) {
			w.mu.Lock()
			w.disabled = append(w.disabled, id)
			w.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Sync(t.Context(), specs)
	m.Tick(t.Context())
	if got := w.disables(); len(got) != 2 {
		t.Errorf("disabled %v, want both credentials", got)
	}
}

// A refresh_token grant sends the client secret the catalog names, as
// Google's token endpoint wants for Gemini CLI's client: without the right
// one there is no token, the credential is not disabled (its refresh token
// is fine), and writing the right secret mends it; Google's refresh tokens
// are not rotated, so every refresh sends the file's.
func TestRefreshTokenGrantSendsTheClientSecret(t *testing.T) {
	w := newWorld(t)
	w.sim.RequireClientSecret("gemini-cli", "cli-secret")
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{
		DB: sqliteFile(t, filepath.Join(t.TempDir(), "s.db")), Key: testKey, Now: w.clock.Now, Log: slog.New(slog.NewJSONHandler(w.logs, nil)),
		Disable: func(_ context.Context, id, _ string) {
			w.mu.Lock()
			w.disabled = append(w.disabled, id)
			w.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Sync(t.Context(), []Spec{{CredentialID: "gca-1", OAuth: config.OAuth{
		TokenURL: w.url + simulator.OAuthTokenPath, ClientID: "gemini-cli", RefreshTokenFile: w.file, ClientSecretFile: secret,
	}}})
	m.Tick(t.Context())
	if _, ok := m.Source("gca-1").Token(); ok || len(w.disables()) != 0 {
		t.Fatalf("with a wrong client secret: a token, or disabled %v", w.disables())
	}
	if got := w.sim.LastTokenRequest().Get("client_secret"); got != "wrong" {
		t.Errorf("client_secret sent = %q, want the file's", got)
	}
	if err := os.WriteFile(secret, []byte("cli-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w.clock.Add(time.Hour)
		m.Tick(t.Context())
		if _, ok := m.Source("gca-1").Token(); !ok {
			t.Fatalf("no token with the right client secret (%d refreshes)", w.sim.Refreshes())
		}
	}
	if n := w.sim.Refreshes(); n != 2 {
		t.Errorf("%d refreshes, want 2 with the one refresh token", n)
	}
}
