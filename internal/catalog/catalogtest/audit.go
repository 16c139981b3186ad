package catalogtest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/catalog"
)

// auditEntry is an entry of the action at the minute, naming targets.
func auditEntry(minute int, action string, targets ...string) *catalog.AuditEntry {
	return &catalog.AuditEntry{
		At: at(minute), TokenID: "ops", Remote: "192.0.2.7", Method: "POST",
		Path: "/admin/keys/batch", Action: action, Targets: targets, Status: 200,
		Before: json.RawMessage(`{"k":{"status":"active"}}`), After: json.RawMessage(`{"k":{"status":"disabled"}}`),
	}
}

func mustAppend(t *testing.T, s Store, e *catalog.AuditEntry) int64 {
	t.Helper()
	if err := s.AppendAudit(t.Context(), e); err != nil {
		t.Fatalf("AppendAudit(%s): %v", e.Action, err)
	}
	return e.ID
}

// actions lists the entries' actions, in the order given.
func actions(entries []catalog.AuditEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Action)
	}
	return out
}

func runAudit(t *testing.T, open func(t *testing.T) Store) {
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		s := open(t)
		want := auditEntry(1, "keys.disable", "web-1", "web-2")
		want.Status, want.Error = 409, "key_transition_invalid"
		mustAppend(t, s, want)
		got, err := s.ListAudit(t.Context(), catalog.AuditFilter{})
		if err != nil || len(got) != 1 {
			t.Fatalf("ListAudit = %d entries, %v; want 1", len(got), err)
		}
		if diff := cmp.Diff(*want, got[0], keyOpts); diff != "" {
			t.Errorf("entry (-appended +listed):\n%s", diff)
		}
		if got[0].At.Location() != time.UTC {
			t.Errorf("At location = %v, want UTC", got[0].At.Location())
		}
	})
	t.Run("RoundTripsEmptyBeforeAndAfter", func(t *testing.T) {
		s := open(t)
		e := auditEntry(1, "catalog.apply")
		e.Before, e.After = nil, nil
		mustAppend(t, s, e)
		got, err := s.ListAudit(t.Context(), catalog.AuditFilter{})
		if err != nil || len(got) != 1 || got[0].Before != nil || got[0].After != nil || len(got[0].Targets) != 0 {
			t.Fatalf("ListAudit = %+v, %v; want one entry without targets, before or after", got, err)
		}
	})
	t.Run("IDsGrowAndListIsNewestFirst", func(t *testing.T) {
		s := open(t)
		var last int64
		for i, action := range []string{"a", "b", "c"} {
			id := mustAppend(t, s, auditEntry(i, action, "k"))
			if id <= last {
				t.Errorf("entry #%d ID = %d, want > %d", i, id, last)
			}
			last = id
		}
		got, err := s.ListAudit(t.Context(), catalog.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"c", "b", "a"}, actions(got)); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		s := open(t)
		mustAppend(t, s, auditEntry(1, "keys.disable", "web-1"))
		mustAppend(t, s, auditEntry(2, "keys.enable", "web-1", "web-2"))
		mustAppend(t, s, auditEntry(3, "keys.disable", "web-2"))
		mustAppend(t, s, auditEntry(4, "catalog.apply"))
		tests := []struct {
			name string
			give catalog.AuditFilter
			want []string
		}{
			{"All", catalog.AuditFilter{}, []string{"catalog.apply", "keys.disable", "keys.enable", "keys.disable"}},
			{"Since", catalog.AuditFilter{Since: at(2)}, []string{"catalog.apply", "keys.disable", "keys.enable"}},
			{"Action", catalog.AuditFilter{Action: "keys.disable"}, []string{"keys.disable", "keys.disable"}},
			{"Target", catalog.AuditFilter{Target: "web-2"}, []string{"keys.disable", "keys.enable"}},
			{"TargetIsExact", catalog.AuditFilter{Target: "web"}, []string{}},
			{"Limit", catalog.AuditFilter{Limit: 2}, []string{"catalog.apply", "keys.disable"}},
			{"Combined", catalog.AuditFilter{Target: "web-1", Action: "keys.enable", Since: at(2), Limit: 5}, []string{"keys.enable"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.ListAudit(t.Context(), tt.give)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, actions(got)); diff != "" {
					t.Errorf("actions (-want +got):\n%s", diff)
				}
			})
		}
	})
	t.Run("ConcurrentAppendsTakeDistinctIDs", func(t *testing.T) {
		s := open(t)
		const n = 8
		ids := make([]int64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				e := auditEntry(i, fmt.Sprintf("a%d", i), "k")
				errs[i] = s.AppendAudit(t.Context(), e)
				ids[i] = e.ID
			})
		}
		wg.Wait()
		seen := make(map[int64]bool)
		for i, id := range ids {
			if errs[i] != nil {
				t.Fatalf("AppendAudit #%d: %v", i, errs[i])
			}
			if seen[id] {
				t.Errorf("ID %d taken twice", id)
			}
			seen[id] = true
		}
		if got, err := s.ListAudit(t.Context(), catalog.AuditFilter{}); err != nil || len(got) != n {
			t.Errorf("ListAudit = %d entries, %v; want %d", len(got), err, n)
		}
	})
}
