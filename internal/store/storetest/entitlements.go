package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/store"
)

// RunEntitlements checks the behaviour every store.Entitlements must have:
// newBackend is called once per case and returns a constructor of replica
// handles on one shared, empty backend.
func RunEntitlements(t *testing.T, newBackend func(t *testing.T) func() store.Entitlements) {
	tests := []struct {
		name string
		run  func(t *testing.T, newReplica func() store.Entitlements)
	}{
		{"RoundTrip", testEntitlementsRoundTrip},
		{"PutReplaces", testEntitlementsPutReplaces},
		{"OneUserTwiceInOnePutKeepsTheLast", testEntitlementsPutTwice},
		{"Filter", testEntitlementsFilter},
		{"Delete", testEntitlementsDelete},
		{"VersionFollowsWrites", testEntitlementsVersion},
		{"Bulk", testEntitlementsBulk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newBackend(t)) })
	}
}

// at is a time as every backend keeps it: UTC, whole microseconds.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func ent(tenant, user, profile string) store.Entitlement {
	return store.Entitlement{EndUser: store.EndUser{Tenant: tenant, User: user}, Profile: profile}
}

func testEntitlementsRoundTrip(t *testing.T, newReplica func() store.Entitlements) {
	s, other := newReplica(), newReplica()
	now := at("2026-12-01T10:00:00.123456Z")
	paid := ent("acme", "bob", "paid")
	paid.Pool, paid.ValidFrom, paid.ValidUntil = "premium", at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00.000001Z")
	want := []store.Entitlement{ent("acme", "alice", "free"), paid, ent("beta", "alice", "enterprise")}
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{want[2], want[1], want[0]}, now); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	for i := range want {
		want[i].UpdatedAt = now
	}
	got, err := other.ListEntitlements(t.Context(), store.EntitlementFilter{})
	if err != nil {
		t.Fatalf("ListEntitlements: %v", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ListEntitlements on another replica (-want +got):\n%s", d)
	}
}

func testEntitlementsPutReplaces(t *testing.T, newReplica func() store.Entitlements) {
	s := newReplica()
	first := ent("acme", "bob", "free")
	first.ValidUntil = at("2026-12-31T00:00:00Z")
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{first}, at("2026-12-01T00:00:00Z")); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	second := ent("acme", "bob", "paid")
	second.Pool = "premium"
	later := at("2026-12-02T00:00:00Z")
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{second}, later); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	second.UpdatedAt = later
	got, err := s.ListEntitlements(t.Context(), store.EntitlementFilter{})
	if err != nil {
		t.Fatalf("ListEntitlements: %v", err)
	}
	if d := cmp.Diff([]store.Entitlement{second}, got); d != "" {
		t.Errorf("after a second Put for the same user (-want +got):\n%s", d)
	}
}

func testEntitlementsPutTwice(t *testing.T, newReplica func() store.Entitlements) {
	s := newReplica()
	now := at("2026-12-01T00:00:00Z")
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{ent("acme", "bob", "free"), ent("acme", "ann", "free"), ent("acme", "bob", "paid")}, now); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	got, err := s.ListEntitlements(t.Context(), store.EntitlementFilter{User: "bob"})
	if err != nil || len(got) != 1 || got[0].Profile != "paid" {
		t.Fatalf("ListEntitlements(bob) = %+v, %v; want bob on paid, the last of the Put", got, err)
	}
}

func testEntitlementsFilter(t *testing.T, newReplica func() store.Entitlements) {
	s := newReplica()
	all := []store.Entitlement{ent("acme", "alice", "free"), ent("acme", "bob", "paid"), ent("beta", "bob", "paid")}
	now := at("2026-12-01T00:00:00Z")
	if err := s.PutEntitlements(t.Context(), all, now); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	for i := range all {
		all[i].UpdatedAt = now
	}
	tests := []struct {
		give store.EntitlementFilter
		want []store.Entitlement
	}{
		{store.EntitlementFilter{Tenant: "acme"}, all[:2]},
		{store.EntitlementFilter{User: "bob"}, all[1:]},
		{store.EntitlementFilter{Profile: "paid", Tenant: "beta"}, all[2:]},
		{store.EntitlementFilter{Tenant: "gamma"}, nil},
	}
	for _, tt := range tests {
		got, err := s.ListEntitlements(t.Context(), tt.give)
		if err != nil {
			t.Fatalf("ListEntitlements(%+v): %v", tt.give, err)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("ListEntitlements(%+v) (-want +got):\n%s", tt.give, d)
		}
	}
}

func testEntitlementsDelete(t *testing.T, newReplica func() store.Entitlements) {
	s := newReplica()
	now := at("2026-12-01T00:00:00Z")
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{ent("acme", "alice", "free"), ent("acme", "bob", "paid")}, now); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	n, err := s.DeleteEntitlements(t.Context(), []store.EndUser{{Tenant: "acme", User: "bob"}, {Tenant: "acme", User: "nobody"}, {Tenant: "beta", User: "alice"}})
	if err != nil || n != 1 {
		t.Fatalf("DeleteEntitlements = %d, %v; want 1, nil", n, err)
	}
	got, err := s.ListEntitlements(t.Context(), store.EntitlementFilter{})
	if err != nil {
		t.Fatalf("ListEntitlements: %v", err)
	}
	want := ent("acme", "alice", "free")
	want.UpdatedAt = now
	if d := cmp.Diff([]store.Entitlement{want}, got); d != "" {
		t.Errorf("after DeleteEntitlements (-want +got):\n%s", d)
	}
}

func testEntitlementsVersion(t *testing.T, newReplica func() store.Entitlements) {
	s, other := newReplica(), newReplica()
	version := func() int64 {
		t.Helper()
		v, err := other.EntitlementsVersion(t.Context())
		if err != nil {
			t.Fatalf("EntitlementsVersion: %v", err)
		}
		return v
	}
	v0 := version()
	if err := s.PutEntitlements(t.Context(), []store.Entitlement{ent("acme", "bob", "paid")}, at("2026-12-01T00:00:00Z")); err != nil {
		t.Fatalf("PutEntitlements: %v", err)
	}
	v1 := version()
	if v1 <= v0 {
		t.Errorf("version after a Put = %d, want more than %d", v1, v0)
	}
	if n, err := s.DeleteEntitlements(t.Context(), []store.EndUser{{Tenant: "acme", User: "nobody"}}); err != nil || n != 0 {
		t.Fatalf("DeleteEntitlements(nobody) = %d, %v; want 0, nil", n, err)
	}
	if v := version(); v != v1 {
		t.Errorf("version after a Delete that removed nothing = %d, want %d unchanged", v, v1)
	}
	if _, err := s.DeleteEntitlements(t.Context(), []store.EndUser{{Tenant: "acme", User: "bob"}}); err != nil {
		t.Fatalf("DeleteEntitlements: %v", err)
	}
	if v := version(); v <= v1 {
		t.Errorf("version after a Delete = %d, want more than %d", v, v1)
	}
}

// testEntitlementsBulk puts hundreds at once, as the admin API's bulk PUT does.
func testEntitlementsBulk(t *testing.T, newReplica func() store.Entitlements) {
	s := newReplica()
	es := make([]store.Entitlement, 500)
	for i := range es {
		es[i] = ent("acme", fmt.Sprintf("user-%03d", i), "paid")
	}
	if err := s.PutEntitlements(t.Context(), es, at("2026-12-01T00:00:00Z")); err != nil {
		t.Fatalf("PutEntitlements(500): %v", err)
	}
	got, err := s.ListEntitlements(t.Context(), store.EntitlementFilter{Tenant: "acme"})
	if err != nil || len(got) != len(es) || got[0].User != "user-000" || got[499].User != "user-499" {
		t.Fatalf("ListEntitlements = %d entitlements (%v), want 500 from user-000 to user-499", len(got), err)
	}
}
