package admin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// The admin API's key documents, byte for byte as earlier builds wrote
// them: a key's settings come from sluice.KeySettings, and a change there
// must not move a byte of these.
const (
	wantRecord  = `{"id":"k1","name":"n","tenant":"t","prefix":"sk-sluice-abcd…","status":"active","models":["fast"],"priority":"interactive","expires_at":"2026-01-02T04:04:05Z","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","static":false,"source":"api","labels":{"env":"prod","team":"search"},"policy":{"mode":"preferred","accounts":["org-1"],"fallback":"any","wait":"1.5s"},"limits":{"rpm":60,"tpm":6000,"max_inflight":2,"daily_tokens":100000},"user_limits":{"rpm":6},"task":"chat","tasks":["batch"],"paths":["chat"],"service_tiers":["flex"],"on_limit":"refuse","billing_account":"acme","assert":["user"]}`
	wantBare    = `{"id":"k2","name":"","tenant":"","prefix":"","status":"active","models":[],"priority":"","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","static":true,"source":"catalog"}`
	wantIssued  = `{"key":"sk-sluice-x","record":{"id":"k2","name":"","tenant":"","prefix":"","status":"active","models":[],"priority":"","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","static":true,"source":"catalog"}}`
	wantSpec    = `{"id":"k1","name":"n","tenant":"t","models":["fast"],"priority":"interactive","expires_in":"1h","labels":{"env":"prod","team":"search"},"policy":{"mode":"preferred","accounts":["org-1"],"fallback":"any","wait":"1.5s"},"limits":{"rpm":60,"tpm":6000,"max_inflight":2,"daily_tokens":100000},"user_limits":{"rpm":6},"task":"chat","tasks":["batch"],"paths":["chat"],"service_tiers":["flex"],"on_limit":"refuse","billing_account":"acme","assert":["user"]}`
	wantMinimal = `{"name":"n","tenant":"t"}`
	wantChange  = `{"name":"x","policy":{"mode":"pool","pool":"p"},"limits":{}}`
)

func TestKeyDocumentsAreStable(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	k := &sluice.Key{ID: "k1", Name: "n", Tenant: "t", Hash: "h", Prefix: "sk-sluice-abcd…", Status: sluice.KeyActive,
		Models: []string{"fast"}, Priority: "interactive", ExpiresAt: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at,
		KeySettings: sluice.KeySettings{
			Labels: map[string]string{"team": "search", "env": "prod"},
			Policy: sluice.RoutePolicy{Mode: "preferred", Accounts: []string{"org-1"}, Fallback: "any", Wait: sluice.Duration(1500 * time.Millisecond)},
			Limits: sluice.Limits{RPM: 60, TPM: 6000, MaxInflight: 2, DailyTokens: 100000}, UserLimits: sluice.Limits{RPM: 6},
			Task: "chat", Tasks: []string{"batch"}, Paths: []string{"chat"}, ServiceTiers: []string{"flex"}, OnLimit: "refuse",
			BillingAccount: "acme", Assert: []string{"user"},
		},
		Budgets: sluice.Budgets{Day: 5}, // the catalog's alone: not shown
	}
	bare := &sluice.Key{ID: "k2", Status: sluice.KeyActive, CreatedAt: at, UpdatedAt: at, Static: true}
	spec := KeySpec{ID: "k1", Name: "n", Tenant: "t", Models: []string{"fast"}, Priority: "interactive", ExpiresIn: "1h", KeySettings: k.KeySettings}
	p, l, name := KeyPolicy{Mode: "pool", Pool: "p"}, KeyLimits{}, "x"
	tests := []struct {
		name string
		give any
		want string
	}{
		{"Record", keyRecord(k, at), wantRecord},
		{"BareRecord", keyRecord(bare, at), wantBare},
		{"Issued", IssuedKey{Key: "sk-sluice-x", Record: keyRecord(bare, at)}, wantIssued},
		{"Spec", spec, wantSpec},
		{"MinimalSpec", KeySpec{Name: "n", Tenant: "t"}, wantMinimal},
		{"Change", KeyChange{Name: &name, Policy: &p, Limits: &l}, wantChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.give)
			if err != nil || string(got) != tt.want {
				t.Errorf("Marshal = %s, %v\nwant %s", got, err, tt.want)
			}
			back := reflect.New(reflect.TypeOf(tt.give))
			if err := json.Unmarshal(got, back.Interface()); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.Marshal(back.Elem().Interface()); string(again) != tt.want {
				t.Errorf("round trip = %s, want %s", again, tt.want)
			}
		})
	}
}

// TestKeyChangeNamesEverySetting checks that a PATCH can change each of a
// key's settings: KeyChange has a field of the same name, type and JSON
// name for every field of sluice.KeySettings.
func TestKeyChangeNamesEverySetting(t *testing.T) {
	settings, change := reflect.TypeFor[sluice.KeySettings](), reflect.TypeFor[KeyChange]()
	for i := range settings.NumField() {
		want := settings.Field(i)
		got, ok := change.FieldByName(want.Name)
		if !ok || got.Type != reflect.PointerTo(want.Type) || jsonName(got) != jsonName(want) {
			t.Errorf("KeyChange.%s = %v %q, want *%v %q", want.Name, got.Type, jsonName(got), want.Type, jsonName(want))
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// TestKeyChangeReplacesEachField checks apply on a change that names every
// field: each replaces the key's, an empty value clears it.
func TestKeyChangeReplacesEachField(t *testing.T) {
	k := &sluice.Key{Name: "old", Models: []string{"a"}, Priority: "standard", KeySettings: sluice.KeySettings{
		Labels: map[string]string{"a": "b"}, Limits: sluice.Limits{RPM: 1}, Tasks: []string{"x"}, OnLimit: "wait"}}
	want := sluice.KeySettings{Policy: KeyPolicy{Mode: "pool", Pool: "p"}, Limits: KeyLimits{}, UserLimits: KeyLimits{TPM: 9},
		Task: "chat", Tasks: []string{}, Paths: []string{"chat"}, ServiceTiers: []string{"flex"}, OnLimit: "refuse",
		BillingAccount: "acme", Assert: []string{"user"}, Labels: map[string]string{}, TraceContent: true}
	name, models, priority := " new ", []string{"b"}, "background"
	c := KeyChange{Name: &name, Models: &models, Priority: &priority, Labels: &want.Labels, Policy: &want.Policy,
		Limits: &want.Limits, UserLimits: &want.UserLimits, Task: &want.Task, Tasks: &want.Tasks, Paths: &want.Paths,
		ServiceTiers: &want.ServiceTiers, OnLimit: &want.OnLimit, BillingAccount: &want.BillingAccount, Assert: &want.Assert,
		TraceContent: &want.TraceContent}
	if err := c.Apply(k); err != nil {
		t.Fatal(err)
	}
	if k.Name != "new" || !reflect.DeepEqual(k.Models, models) || k.Priority != priority {
		t.Errorf("name, models, priority = %q %v %q, want %q %v %q", k.Name, k.Models, k.Priority, "new", models, priority)
	}
	if diff := cmp.Diff(want, k.KeySettings); diff != "" {
		t.Errorf("settings after apply (-want +got):\n%s", diff)
	}
}
