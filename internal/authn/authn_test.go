package authn

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/memcatalog"
)

func newKeyring(t *testing.T) (*Keyring, *memcatalog.Store) {
	t.Helper()
	store := new(memcatalog.Store)
	return NewKeyring(store), store
}

func wantUnauthenticated(t *testing.T, kr *Keyring, token, why string) {
	t.Helper()
	if _, err := kr.Authenticate(token); !errors.Is(err, &sluice.Error{Code: sluice.CodeNoCredentials}) {
		t.Errorf("Authenticate(%s key) error = %v, want no_credentials", why, err)
	}
}

func TestKeyStates(t *testing.T) {
	ctx := t.Context()
	kr, _ := newKeyring(t)
	k, secret, err := kr.Create(ctx, sluice.Key{Name: "web", Tenant: "t1", Models: []string{"fast"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := kr.Authenticate(secret)
	if err != nil || p.Key.ID != k.ID || p.Key.Tenant != "t1" {
		t.Fatalf("Authenticate(new key) = %+v, %v; want principal of %s", p, err, k.ID)
	}

	if _, err := kr.Disable(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "disabled")
	if _, err := kr.Enable(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Authenticate(secret); err != nil {
		t.Errorf("Authenticate(re-enabled key) error = %v", err)
	}

	if _, err := kr.Expire(ctx, k.ID, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "expired")
	if _, err := kr.Expire(ctx, k.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}

	_, newSecret, err := kr.Rotate(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "rotated-out")
	if _, err := kr.Authenticate(newSecret); err != nil {
		t.Errorf("Authenticate(rotated key) error = %v", err)
	}

	if _, err := kr.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, newSecret, "revoked")
	if _, err := kr.Enable(ctx, k.ID); !errors.Is(err, ErrTransition) {
		t.Errorf("Enable(revoked) error = %v, want ErrTransition", err)
	}
}

func TestPendingKeyNeedsEnable(t *testing.T) {
	kr, _ := newKeyring(t)
	k, secret, err := kr.Create(t.Context(), sluice.Key{Name: "later", Status: sluice.KeyPending})
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "pending")
	if _, err := kr.Enable(t.Context(), k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Authenticate(secret); err != nil {
		t.Errorf("Authenticate(enabled pending key) error = %v", err)
	}
}

func TestUnknownAndMalformedTokens(t *testing.T) {
	kr, _ := newKeyring(t)
	for _, tok := range []string{"", "sk-sluice-", "sk-sluice-nope", "Bearer x", strings.Repeat("a", 5000)} {
		wantUnauthenticated(t, kr, tok, "unknown")
	}
}

func TestStoredKeyHoldsNoPlaintext(t *testing.T) {
	kr, store := newKeyring(t)
	k, secret, err := kr.Create(t.Context(), sluice.Key{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.LoadKey(t.Context(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != Hash(secret) || strings.Contains(got.Hash+got.Prefix+got.Name+got.ID, secret[len(KeyPrefix)+4:]) {
		t.Errorf("stored key %+v holds the plaintext or a wrong hash", got)
	}
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) != len(KeyPrefix)+secretLen {
		t.Errorf("NewSecret() = %d chars %q…, want %s + %d", len(secret), secret[:12], KeyPrefix, secretLen)
	}
}

func TestCreateRefusesDuplicateID(t *testing.T) {
	kr, _ := newKeyring(t)
	if _, _, err := kr.Create(t.Context(), sluice.Key{ID: "same"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kr.Create(t.Context(), sluice.Key{ID: "same"}); !errors.Is(err, catalog.ErrConflict) {
		t.Errorf("Create(duplicate ID) error = %v, want ErrConflict", err)
	}
}

func TestStaticKeys(t *testing.T) {
	kr, _ := newKeyring(t)
	kr.SetStatic([]*sluice.Key{{ID: "web", Hash: Hash("static-secret-web"), Status: sluice.KeyActive, Static: true}})
	if p, err := kr.Authenticate("static-secret-web"); err != nil || p.Key.ID != "web" {
		t.Fatalf("Authenticate(static) = %v, %v", p, err)
	}
	kr.SetStatic(nil) // a reload that removed the key
	wantUnauthenticated(t, kr, "static-secret-web", "removed static")
}

func TestRefreshSeesOtherWriters(t *testing.T) {
	ctx := t.Context()
	kr, store := newKeyring(t)
	other := NewKeyring(store) // another replica on the same store
	k, secret, err := other.Create(ctx, sluice.Key{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "not yet refreshed")
	if err := kr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Authenticate(secret); err != nil {
		t.Errorf("Authenticate after Refresh error = %v", err)
	}
	if _, err := other.Disable(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := kr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, kr, secret, "disabled by another replica")
}

func BenchmarkAuthenticate(b *testing.B) {
	kr := NewKeyring(new(memcatalog.Store))
	_, secret, err := kr.Create(b.Context(), sluice.Key{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kr.Authenticate(secret); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCatalogKeysAreListedAndReadOnly(t *testing.T) {
	ctx := t.Context()
	kr, _ := newKeyring(t)
	kr.SetStatic([]*sluice.Key{{ID: "web", Hash: Hash("static-secret-web"), Status: sluice.KeyActive, Static: true}})
	if _, _, err := kr.Create(ctx, sluice.Key{ID: "api", Name: "api"}); err != nil {
		t.Fatal(err)
	}
	keys, err := kr.List(ctx)
	if err != nil || len(keys) != 2 || keys[0].ID != "web" || !keys[0].Static || keys[1].ID != "api" || keys[1].Static {
		t.Fatalf("List = %v, %v; want the catalog's web, then the stored api", keys, err)
	}
	if k, err := kr.Load(ctx, "web"); err != nil || !k.Static {
		t.Errorf("Load(web) = %v, %v; want the catalog's key", k, err)
	}
	if _, err := kr.Disable(ctx, "web"); !errors.Is(err, ErrStatic) {
		t.Errorf("Disable(catalog key) error = %v, want ErrStatic", err)
	}
	if _, err := kr.Update(ctx, "web", func(*sluice.Key) error { return nil }); !errors.Is(err, ErrStatic) {
		t.Errorf("Update(catalog key) error = %v, want ErrStatic", err)
	}
	if _, _, err := kr.Create(ctx, sluice.Key{ID: "web"}); !errors.Is(err, catalog.ErrConflict) {
		t.Errorf("Create(a catalog key's ID) error = %v, want ErrConflict", err)
	}
}

// TestListAfterPagesStaticThenStored: pages of ListAfter walk List's
// order, the catalog's keys first, across the seam, with List's total.
func TestListAfterPagesStaticThenStored(t *testing.T) {
	ctx := t.Context()
	kr, _ := newKeyring(t)
	kr.SetStatic([]*sluice.Key{{ID: "web", Hash: Hash("s-web"), Static: true}, {ID: "cli", Hash: Hash("s-cli"), Static: true}})
	for _, id := range []string{"k1", "k2", "k3"} {
		if _, _, err := kr.Create(ctx, sluice.Key{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	var walked []string
	for after, pages := "", 0; pages < 10; pages++ {
		keys, total, err := kr.ListAfter(ctx, after, 2)
		if err != nil || total != 5 {
			t.Fatalf("ListAfter(%q, 2) = %v, total %d, %v; want total 5", after, keys, total, err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			walked = append(walked, k.ID)
		}
		after = keys[len(keys)-1].ID
	}
	all, err := kr.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range all {
		want = append(want, k.ID)
	}
	if !slices.Equal(walked, want) || len(want) != 5 {
		t.Errorf("pages of 2 walked %v, want List's %v", walked, want)
	}
	if _, _, err := kr.ListAfter(ctx, "none", 2); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("ListAfter(unknown) = %v, want ErrNotFound", err)
	}
}

func TestFollowChecksWritesAndPublishesChanges(t *testing.T) {
	ctx := t.Context()
	kr, store := newKeyring(t)
	var published [][]*sluice.Key
	kr.Follow(func(k *sluice.Key) error {
		if k.Limits.RPM < 0 {
			return errors.New("limits.rpm: must be >= 0")
		}
		return nil
	}, func(keys []*sluice.Key) { published = append(published, keys) })

	_, _, err := kr.Create(ctx, sluice.Key{ID: "bad", KeySettings: sluice.KeySettings{Limits: sluice.Limits{RPM: -1}}})
	if !errors.Is(err, &sluice.Error{Code: sluice.CodeInvalidRequest}) || !strings.Contains(err.Error(), "limits.rpm: must be >= 0") {
		t.Errorf("Create(invalid) error = %v, want invalid_request with the check's message", err)
	}
	k, _, err := kr.Create(ctx, sluice.Key{ID: "ok", KeySettings: sluice.KeySettings{Labels: map[string]string{"team": "a"}, OnLimit: sluice.OnLimitRefuse}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Update(ctx, k.ID, func(k *sluice.Key) error { k.Limits.RPM = -1; return nil }); !errors.Is(err, &sluice.Error{Code: sluice.CodeInvalidRequest}) {
		t.Errorf("Update(invalid) error = %v, want invalid_request", err)
	}
	if got, _ := store.LoadKey(ctx, "ok"); got.Limits.RPM != 0 {
		t.Errorf("stored Limits.RPM = %d after a refused update, want 0", got.Limits.RPM)
	}
	if len(published) != 1 || len(published[0]) != 1 || published[0][0].Labels["team"] != "a" {
		t.Fatalf("published = %v, want the one created key with its labels", published)
	}
	if err := kr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(published) != 1 {
		t.Errorf("a refresh that found no change published again (%d times)", len(published))
	}
	if _, err := kr.Disable(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if len(published) != 2 || published[1][0].Status != sluice.KeyDisabled {
		t.Errorf("published after Disable = %v, want the disabled key", published)
	}
}

// TestAuthenticateAllocatesOnlyThePrincipal: a key's lookup hashes the
// token without allocating its text (the key's hash) on every request.
func TestAuthenticateAllocatesOnlyThePrincipal(t *testing.T) {
	const token = "sk-sluice-0123456789abcdefghijklmnopqrstuvwxyz"
	kr := NewKeyring(nil)
	kr.SetStatic([]*sluice.Key{{ID: "k", Hash: Hash(token), Status: sluice.KeyActive}})
	if _, err := kr.Authenticate(token); err != nil {
		t.Fatal(err)
	}
	// The principal, and the token's bytes for SHA-256 (longer than the
	// compiler's 32-byte stack buffer).
	n := testing.AllocsPerRun(100, func() { _, _ = kr.Authenticate(token) })
	t.Logf("Authenticate: %v allocations", n)
	if n > 2 {
		t.Errorf("Authenticate allocates %v times, want at most 2", n)
	}
}
