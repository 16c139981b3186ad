package authn

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/memcatalog"
)

// TestSuspensionsReachEveryKeyring checks that a suspension made through
// one keyring is in its view at once and in another keyring's on the same
// store after its next refresh, and that a resume is followed the same way.
func TestSuspensionsReachEveryKeyring(t *testing.T) {
	ctx := t.Context()
	store := new(memcatalog.Store)
	one, other := NewKeyring(store), NewKeyring(store)
	one.TrackSuspensions(store)
	other.TrackSuspensions(store)
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sp := catalog.Suspension{Kind: catalog.SuspendedBillingAccount, ID: "acme", Reason: "unpaid invoice", Since: since, By: "ops"}
	if err := one.Suspend(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if got, ok := one.Suspended(catalog.SuspendedBillingAccount, "acme"); !ok || got != sp {
		t.Errorf("the suspending keyring's Suspended(acme) = %+v, %v; want %+v at once", got, ok, sp)
	}
	if _, ok := other.Suspended(catalog.SuspendedBillingAccount, "acme"); ok {
		t.Errorf("another keyring saw the suspension before it refreshed")
	}
	if _, ok := one.Suspended(catalog.SuspendedTenant, "acme"); ok {
		t.Errorf("the tenant acme is suspended with the billing account of the same ID")
	}
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]catalog.Suspension{sp}, other.Suspensions(catalog.SuspendedBillingAccount)); diff != "" {
		t.Errorf("another keyring's suspensions after a refresh (-want +got):\n%s", diff)
	}
	if had, err := other.Resume(ctx, catalog.SuspendedBillingAccount, "acme"); err != nil || !had {
		t.Fatalf("Resume = %v, %v; want true, nil", had, err)
	}
	if _, ok := other.Suspended(catalog.SuspendedBillingAccount, "acme"); ok {
		t.Errorf("the resuming keyring still sees the suspension")
	}
	if err := one.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := one.Suspensions(catalog.SuspendedBillingAccount); len(got) != 0 {
		t.Errorf("after the resume and a refresh, suspensions = %+v, want none", got)
	}
}

// failingKeys is a key store that fails every call while down is set.
type failingKeys struct {
	*memcatalog.Store
	down atomic.Bool
}

var errDown = errors.New("database unreachable")

func (f *failingKeys) ListKeys(ctx context.Context) ([]*sluice.Key, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.ListKeys(ctx)
}

// TestStaleViewRefusesEveryToken checks that once the last successful
// refresh is older than the bound every token — stored, from the catalog,
// unknown — gets 503 state_unavailable with a Retry-After, and that the
// keys serve again after the store comes back.
func TestStaleViewRefusesEveryToken(t *testing.T) {
	ctx := t.Context()
	store := &failingKeys{Store: new(memcatalog.Store)}
	kr := NewKeyring(store)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	kr.now = func() time.Time { return now }
	kr.FailClosed(func() time.Duration { return 30 * time.Second })
	_, stored, err := kr.Create(ctx, sluice.Key{Name: "web", Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	const static = "sk-sluice-static-key-of-the-catalog"
	kr.SetStatic([]*sluice.Key{{ID: "static", Tenant: "t1", Hash: Hash(static), Status: sluice.KeyActive}})
	serves := func(why string) {
		t.Helper()
		for _, token := range []string{stored, static} {
			if _, err := kr.Authenticate(token); err != nil {
				t.Errorf("%s: Authenticate = %v, want a principal", why, err)
			}
		}
	}
	serves("fresh")

	store.down.Store(true)
	now = now.Add(29 * time.Second)
	if err := kr.Refresh(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Refresh with the store down = %v, want %v", err, errDown)
	}
	serves("within the bound")
	if got := kr.RefreshedAt(); !got.Equal(now.Add(-29 * time.Second)) {
		t.Errorf("RefreshedAt = %v, want the last success, %v", got, now.Add(-29*time.Second))
	}

	now = now.Add(2 * time.Second)
	for _, token := range []string{stored, static, "sk-sluice-unknown", ""} {
		_, err := kr.Authenticate(token)
		if se, ok := errors.AsType[*sluice.Error](err); !ok || se.Code != sluice.CodeStateUnavailable || se.RetryAfter <= 0 {
			t.Errorf("past the bound: Authenticate(%q) = %v, want state_unavailable with a Retry-After", token, err)
		}
	}

	store.down.Store(false)
	if err := kr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	serves("after the store came back")
}

// TestNoBoundNeverRefuses checks that a keyring without a bound (or with
// a bound of 0) judges by its view however old it is.
func TestNoBoundNeverRefuses(t *testing.T) {
	kr, _ := newKeyring(t)
	_, secret, err := kr.Create(t.Context(), sluice.Key{Name: "web", Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Hour)
	kr.now = func() time.Time { return now }
	if _, err := kr.Authenticate(secret); err != nil {
		t.Errorf("without FailClosed: Authenticate = %v", err)
	}
	kr.FailClosed(func() time.Duration { return 0 })
	if _, err := kr.Authenticate(secret); err != nil {
		t.Errorf("with a bound of 0: Authenticate = %v", err)
	}
}
