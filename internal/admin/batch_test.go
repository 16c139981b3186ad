package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/admin"
)

// batchHarness is a harness with keys for each case of a batch on team=web:
// web-1 active, web-2 disabled, web-3 revoked, api-1 of another team, and
// cat-1, a catalog key of team web.
func batchHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	ctx := t.Context()
	for _, spec := range []admin.KeySpec{
		{ID: "web-1", Name: "web", Tenant: "web", KeySettings: admin.KeySettings{Labels: map[string]string{"team": "web", "env": "prod"}}},
		{ID: "web-2", Name: "web", Tenant: "web", KeySettings: admin.KeySettings{Labels: map[string]string{"team": "web"}}},
		{ID: "web-3", Name: "web", Tenant: "web", KeySettings: admin.KeySettings{Labels: map[string]string{"team": "web"}}},
		{ID: "api-1", Name: "api", Tenant: "api", KeySettings: admin.KeySettings{Labels: map[string]string{"team": "api"}}},
	} {
		if _, err := h.client.CreateKey(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.Disable(ctx, "web-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Revoke(ctx, "web-3"); err != nil {
		t.Fatal(err)
	}
	h.keys.SetStatic([]*sluice.Key{{ID: "cat-1", Name: "catalog", Tenant: "web", Hash: "h", Status: sluice.KeyActive,
		Static: true, KeySettings: sluice.KeySettings{Labels: map[string]string{"team": "web"}}}})
	return h
}

// records returns every key's record, by ID, updated_at aside.
func records(t *testing.T, h *harness) map[string]admin.KeyRecord {
	t.Helper()
	list, err := h.client.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]admin.KeyRecord, len(list))
	for _, k := range list {
		k.UpdatedAt = k.CreatedAt
		out[k.ID] = k
	}
	return out
}

func TestBatchDryRunEqualsApplied(t *testing.T) {
	tests := []struct {
		name        string
		give        admin.Batch
		wantChanged []string
	}{
		{"Disable", admin.Batch{Selector: "team=web", Operation: "disable"}, []string{"web-1"}},
		{"DisableNotProd", admin.Batch{Selector: "team=web,env!=prod", Operation: "disable"}, []string{}},
		{"Enable", admin.Batch{Selector: "team in (web)", Operation: "enable"}, []string{"web-2"}},
		{"SetLimits", admin.Batch{Selector: "team=web", Operation: "set_limits", Limits: &admin.KeyLimits{RPM: 60, MaxInflight: 2}},
			[]string{"web-1", "web-2", "web-3"}}, // a revoked key's settings may change, as through PATCH
		{"SetPolicy", admin.Batch{Selector: "team", Operation: "set_policy", Policy: &admin.KeyPolicy{Mode: "pool", Pool: "background"}},
			[]string{"web-1", "web-2", "web-3", "api-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := batchHarness(t)
			ctx := t.Context()
			was := records(t, h)

			dry := tt.give
			dry.DryRun = true
			preview, err := h.client.Batch(ctx, dry)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(was, records(t, h)); diff != "" {
				t.Fatalf("the dry run changed keys (-before +after):\n%s", diff)
			}
			applied, err := h.client.Batch(ctx, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			if !preview.DryRun || applied.DryRun {
				t.Errorf("dry_run = %v then %v, want true then false", preview.DryRun, applied.DryRun)
			}
			preview.DryRun = false
			if diff := cmp.Diff(preview, applied); diff != "" {
				t.Errorf("the change applied differs from its dry run (-dry run +applied):\n%s", diff)
			}
			var changed []string
			for _, d := range applied.Changed {
				changed = append(changed, d.ID)
			}
			if diff := cmp.Diff(tt.wantChanged, changed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("changed keys (-want +got):\n%s", diff)
			}
			// What the batch reported is what the keys became, and nothing else changed.
			now := records(t, h)
			for _, d := range applied.Changed {
				for field, c := range d.Fields {
					if got := fieldOf(t, now[d.ID], field); got != string(c.After) {
						t.Errorf("%s.%s = %s, want %s as reported", d.ID, field, got, c.After)
					}
				}
				delete(now, d.ID)
				delete(was, d.ID)
			}
			if diff := cmp.Diff(was, now); diff != "" {
				t.Errorf("keys the batch did not report changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestBatchReportsSkippedAndUnchanged(t *testing.T) {
	h := batchHarness(t)
	got, err := h.client.Batch(t.Context(), admin.Batch{Selector: "team=web", Operation: "disable", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []admin.SkippedKey{
		{ID: "cat-1", Reason: "declared in the catalog: change it there"},
		{ID: "web-3", Reason: "key web-3 is revoked: transition not allowed"},
	}
	if diff := cmp.Diff(want, got.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web-2"}, got.Unchanged); diff != "" {
		t.Errorf("unchanged (-want +got):\n%s", diff)
	}
	wantFields := map[string]admin.FieldChange{"status": {Before: []byte(`"active"`), After: []byte(`"disabled"`)}}
	if len(got.Changed) != 1 || got.Changed[0].ID != "web-1" || !cmp.Equal(wantFields, got.Changed[0].Fields) {
		t.Errorf("changed = %+v, want web-1 status active → disabled", got.Changed)
	}
	log := h.auditLog(t)
	if e := log[0]; e.Action != "keys.batch.disable.dry_run" || string(e.Before) != string(e.After) || len(e.Targets) != 1 {
		t.Errorf("audit entry of the dry run = %s %v before %s after %s; want the dry run named, nothing changed", e.Action, e.Targets, e.Before, e.After)
	}
}

func TestBatchRefuses(t *testing.T) {
	h := batchHarness(t)
	tests := []struct {
		name string
		body string
		want string
	}{
		{"NoSelector", `{"operation":"disable"}`, `selector "": empty; name at least one label`},
		{"BadSelector", `{"selector":"team in (web","operation":"disable"}`, "'(' without ')'"},
		{"UnknownOperation", `{"selector":"team=web","operation":"revoke"}`, `operation "revoke" is not one of`},
		{"PolicyWithDisable", `{"selector":"team=web","operation":"disable","policy":{"mode":"default"}}`, "policy goes with the operation set_policy"},
		{"SetLimitsWithoutLimits", `{"selector":"team=web","operation":"set_limits"}`, "limits with set_limits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, http.MethodPost, "/admin/keys/batch", testToken, tt.body)
			e := decodeError(t, body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("batch %s = %d %q, want 400 with %q", tt.body, resp.StatusCode, e.Error.Message, tt.want)
			}
		})
	}
}

// fieldOf is the JSON of one field of the record.
func fieldOf(t *testing.T, r admin.KeyRecord, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	b, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(m[field])
}
