// Package catalogtest is the contract suite every catalog store must pass:
// memcatalog and sqlcatalog (on SQLite and PostgreSQL) run the same cases.
//
// It is imported by tests only, and must not depend on any implementation.
package catalogtest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Store is what a catalog implementation provides.
type Store interface {
	catalog.Keys
	catalog.Documents
	catalog.Replicas
	catalog.Audit
	catalog.Suspensions
}

// Run checks the behaviour every Store must have. open returns a new,
// empty store for each case; it is called once per subtest.
func Run(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Keys", func(t *testing.T) { runKeys(t, open) })
	t.Run("Documents", func(t *testing.T) { runDocuments(t, open) })
	t.Run("Versions", func(t *testing.T) { runVersions(t, open) })
	t.Run("Replicas", func(t *testing.T) { runReplicas(t, open) })
	t.Run("Audit", func(t *testing.T) { runAudit(t, open) })
	t.Run("Suspensions", func(t *testing.T) { runSuspensions(t, open) })
}

// keyOpts compare keys as stored: instants, not locations, and a nil or
// empty Models alike.
var keyOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

// at is a time with millisecond precision, in a zone other than UTC, so a
// store that keeps instants at that precision returns it Equal.
func at(minute int) time.Time {
	return time.Date(2025, 3, 14, 15, minute, 26, 535_000_000, time.FixedZone("CET", 3600))
}

// newKey returns a key with every field set.
func newKey(id string) *sluice.Key {
	return &sluice.Key{
		ID:        id,
		Name:      "name of " + id,
		Tenant:    "tenant-a",
		Hash:      "hash-" + id,
		Prefix:    "sk-" + id[:min(len(id), 4)],
		Status:    sluice.KeyActive,
		Models:    []string{"fast", "smart"},
		Priority:  "interactive",
		ExpiresAt: at(30),
		CreatedAt: at(1),
		UpdatedAt: at(2),
		Static:    true,
		KeySettings: sluice.KeySettings{
			Labels: map[string]string{"team": "search", "env": "prod"},
			Policy: sluice.RoutePolicy{Mode: "preferred", Accounts: []string{"acct-a", "acct-b"}, Pool: "pool-a", Fallback: "any",
				Wait: sluice.Duration(1500 * time.Millisecond)},
			Limits:         sluice.Limits{RPM: 60, TPM: 6000, MaxInflight: 4, DailyTokens: 100000},
			UserLimits:     sluice.Limits{RPM: 6, TPM: 600, MaxInflight: 1, DailyTokens: 1000},
			Task:           "chat",
			Tasks:          []string{"batch", "eval"},
			Paths:          []string{"chat", "embeddings"},
			ServiceTiers:   []string{"default", "flex"},
			OnLimit:        sluice.OnLimitRefuse,
			BillingAccount: "acme",
			Assert:         []string{"user", "profile"},
			TraceContent:   true,
		},
		Budgets: sluice.Budgets{Day: 5_000_000, Month: 100_000_000},
	}
}

// unset lists the fields of the struct v, inner structs' fields included,
// that hold their zero value.
func unset(v reflect.Value, path string) []string {
	var zero []string
	for i := range v.NumField() {
		f, at := v.Field(i), path+"."+v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]():
			zero = append(zero, unset(f, at)...)
		case f.IsZero():
			zero = append(zero, at)
		}
	}
	return zero
}

func mustSaveKey(t *testing.T, s Store, k *sluice.Key) {
	t.Helper()
	if err := s.SaveKey(t.Context(), k); err != nil {
		t.Fatalf("SaveKey(%s) = %v", k.ID, err)
	}
}

func mustLoadKey(t *testing.T, s Store, id string) *sluice.Key {
	t.Helper()
	k, err := s.LoadKey(t.Context(), id)
	if err != nil {
		t.Fatalf("LoadKey(%s) = %v", id, err)
	}
	return k
}

func mustListKeys(t *testing.T, s Store) []string {
	t.Helper()
	keys, err := s.ListKeys(t.Context())
	if err != nil {
		t.Fatalf("ListKeys = %v", err)
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

func runKeys(t *testing.T, open func(t *testing.T) Store) {
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		s := open(t)
		want := newKey("k1")
		if zero := unset(reflect.ValueOf(*want), "Key"); len(zero) > 0 {
			t.Fatalf("newKey leaves %v unset: a field it does not set is a field no store is checked to keep", zero)
		}
		mustSaveKey(t, s, want)
		got := mustLoadKey(t, s, "k1")
		if diff := cmp.Diff(want, got, keyOpts); diff != "" {
			t.Errorf("LoadKey mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("RoundTripsZeroValues", func(t *testing.T) {
		s := open(t)
		want := &sluice.Key{ID: "bare", Hash: "h", Status: sluice.KeyPending, CreatedAt: at(1), UpdatedAt: at(1)}
		mustSaveKey(t, s, want)
		got := mustLoadKey(t, s, "bare")
		if diff := cmp.Diff(want, got, keyOpts); diff != "" {
			t.Errorf("LoadKey mismatch (-want +got):\n%s", diff)
		}
		if !got.ExpiresAt.IsZero() {
			t.Errorf("ExpiresAt = %v, want the zero time (never)", got.ExpiresAt)
		}
	})

	t.Run("ReturnsUTC", func(t *testing.T) {
		s := open(t)
		mustSaveKey(t, s, newKey("k1"))
		got := mustLoadKey(t, s, "k1")
		for name, tm := range map[string]time.Time{"ExpiresAt": got.ExpiresAt, "CreatedAt": got.CreatedAt, "UpdatedAt": got.UpdatedAt} {
			if tm.Location() != time.UTC {
				t.Errorf("%s location = %v, want UTC", name, tm.Location())
			}
		}
	})

	t.Run("SaveReplacesByID", func(t *testing.T) {
		s := open(t)
		mustSaveKey(t, s, newKey("k1"))
		want := &sluice.Key{
			ID: "k1", Name: "renamed", Tenant: "tenant-b", Hash: "new-hash", Prefix: "sk-new",
			Status: sluice.KeyRevoked, Priority: "background", CreatedAt: at(1), UpdatedAt: at(5),
		}
		mustSaveKey(t, s, want)
		if diff := cmp.Diff(want, mustLoadKey(t, s, "k1"), keyOpts); diff != "" {
			t.Errorf("LoadKey after replace mismatch (-want +got):\n%s", diff)
		}
		if ids := mustListKeys(t, s); len(ids) != 1 {
			t.Errorf("ListKeys = %v, want only k1", ids)
		}
		// The replaced key's old hash is free for another key.
		other := newKey("k2")
		other.Hash = "hash-k1"
		mustSaveKey(t, s, other)
	})

	t.Run("LoadMissingIsNotFound", func(t *testing.T) {
		s := open(t)
		mustSaveKey(t, s, newKey("k1"))
		if k, err := s.LoadKey(t.Context(), "nope"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("LoadKey(nope) = %v, %v; want ErrNotFound", k, err)
		}
	})

	t.Run("DuplicateHashIsConflict", func(t *testing.T) {
		s := open(t)
		first := newKey("k1")
		mustSaveKey(t, s, first)
		dup := newKey("k2")
		dup.Hash = first.Hash
		if err := s.SaveKey(t.Context(), dup); !errors.Is(err, catalog.ErrConflict) {
			t.Errorf("SaveKey(k2 with k1's hash) = %v, want ErrConflict", err)
		}
		if k, err := s.LoadKey(t.Context(), "k2"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("LoadKey(k2) after conflict = %v, %v; want ErrNotFound", k, err)
		}
		if diff := cmp.Diff(first, mustLoadKey(t, s, "k1"), keyOpts); diff != "" {
			t.Errorf("k1 changed by the conflicting save (-want +got):\n%s", diff)
		}
	})

	t.Run("ListIsOrderedByCreatedAtThenID", func(t *testing.T) {
		s := open(t)
		if ids := mustListKeys(t, s); len(ids) != 0 {
			t.Fatalf("ListKeys of an empty store = %v, want none", ids)
		}
		for _, k := range []struct {
			id     string
			minute int
		}{{"c", 2}, {"b", 1}, {"d", 1}, {"a", 3}, {"a0", 1}} {
			key := newKey(k.id)
			key.CreatedAt = at(k.minute)
			mustSaveKey(t, s, key)
		}
		if diff := cmp.Diff([]string{"a0", "b", "d", "c", "a"}, mustListKeys(t, s)); diff != "" {
			t.Errorf("ListKeys order (-want +got):\n%s", diff)
		}
	})

	t.Run("ListKeysAfterPagesInListOrder", func(t *testing.T) {
		s := open(t)
		for _, k := range []struct {
			id     string
			minute int
		}{{"c", 2}, {"b", 1}, {"d", 1}, {"a", 3}, {"a0", 1}} {
			key := newKey(k.id)
			key.CreatedAt = at(k.minute)
			mustSaveKey(t, s, key)
		}
		for _, c := range []struct {
			after string
			limit int
			want  []string
		}{
			{"", 2, []string{"a0", "b"}}, {"b", 2, []string{"d", "c"}}, {"c", 10, []string{"a"}}, {"a", 10, nil},
		} {
			keys, total, err := s.ListKeysAfter(t.Context(), c.after, c.limit)
			if err != nil {
				t.Fatalf("ListKeysAfter(%q, %d) = %v", c.after, c.limit, err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
			}
			if !cmp.Equal(c.want, ids) || total != 5 {
				t.Errorf("ListKeysAfter(%q, %d) = %v, total %d; want %v, 5", c.after, c.limit, ids, total, c.want)
			}
		}
		if _, _, err := s.ListKeysAfter(t.Context(), "none", 10); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("ListKeysAfter(unknown) = %v, want ErrNotFound", err)
		}
	})

	t.Run("CallerCannotMutateStoredKeys", func(t *testing.T) {
		s := open(t)
		saved := newKey("k1")
		mustSaveKey(t, s, saved)
		saved.Models[0] = "mutated after save"
		saved.Name = "mutated after save"
		saved.Labels["team"] = "mutated after save"
		saved.Policy.Accounts[0], saved.Tasks[0], saved.Paths[0] = "mutated", "mutated", "mutated"
		loaded := mustLoadKey(t, s, "k1")
		loaded.Models[0] = "mutated after load"
		loaded.Labels["env"] = "mutated after load"
		loaded.ServiceTiers[0] = "mutated after load"
		listed, err := s.ListKeys(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		listed[0].Models[1] = "mutated after list"
		if diff := cmp.Diff(newKey("k1"), mustLoadKey(t, s, "k1"), keyOpts); diff != "" {
			t.Errorf("stored key changed through a caller's copy (-want +got):\n%s", diff)
		}
	})

	t.Run("ConcurrentSavesAreSafe", func(t *testing.T) {
		s := open(t)
		const writers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					errs <- s.SaveKey(t.Context(), newKey(fmt.Sprintf("w%d-%02d", w, i)))
					shared := newKey("shared")
					shared.Name = fmt.Sprintf("by writer %d", w)
					errs <- s.SaveKey(t.Context(), shared)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent SaveKey = %v", err)
			}
		}
		if ids := mustListKeys(t, s); len(ids) != writers*each+1 {
			t.Errorf("ListKeys after concurrent saves has %d keys, want %d", len(ids), writers*each+1)
		}
	})
}

func mustSaveCatalog(t *testing.T, s Store, doc string, ifVersion int64) int64 {
	t.Helper()
	v, err := s.SaveCatalog(t.Context(), catalog.CatalogVersion{Doc: []byte(doc)}, ifVersion)
	if err != nil {
		t.Fatalf("SaveCatalog(%q, %d) = %v", doc, ifVersion, err)
	}
	return v.Version
}

// saveDoc saves doc with no version check and returns the error alone.
func saveDoc(t *testing.T, s Store, doc []byte, ifVersion int64) error {
	_, err := s.SaveCatalog(t.Context(), catalog.CatalogVersion{Doc: doc}, ifVersion)
	return err
}

func wantLatest(t *testing.T, s Store, doc string, version int64) {
	t.Helper()
	got, v, err := s.LoadCatalog(t.Context())
	if err != nil || string(got) != doc || v != version {
		t.Errorf("LoadCatalog = %q, %d, %v; want %q, %d, nil", got, v, err, doc, version)
	}
}

func runDocuments(t *testing.T, open func(t *testing.T) Store) {
	t.Run("LoadEmptyIsNotFound", func(t *testing.T) {
		s := open(t)
		if doc, v, err := s.LoadCatalog(t.Context()); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("LoadCatalog of an empty store = %q, %d, %v; want ErrNotFound", doc, v, err)
		}
	})

	t.Run("VersionsCountFromOne", func(t *testing.T) {
		s := open(t)
		for i, want := range []int64{1, 2, 3} {
			doc := fmt.Sprintf("version: %d\n", want)
			if got := mustSaveCatalog(t, s, doc, 0); got != want {
				t.Errorf("SaveCatalog #%d = %d, want %d", i, got, want)
			}
			wantLatest(t, s, doc, want)
		}
	})

	t.Run("RoundTripsBytes", func(t *testing.T) {
		s := open(t)
		doc := "\x00\xff binary \xfe\n"
		mustSaveCatalog(t, s, doc, 0)
		wantLatest(t, s, doc, 1)
	})

	t.Run("IfVersionMustMatch", func(t *testing.T) {
		s := open(t)
		mustSaveCatalog(t, s, "one", 0)
		mustSaveCatalog(t, s, "two", 1)
		for _, stale := range []int64{1, 3} {
			if err := saveDoc(t, s, []byte("stale"), stale); !errors.Is(err, catalog.ErrConflict) {
				t.Errorf("SaveCatalog(ifVersion %d) at version 2 = %v; want ErrConflict", stale, err)
			}
		}
		wantLatest(t, s, "two", 2)
		if got := mustSaveCatalog(t, s, "three", 2); got != 3 {
			t.Errorf("SaveCatalog(ifVersion 2) = %d, want 3", got)
		}
	})

	t.Run("IfVersionOnEmptyStoreIsConflict", func(t *testing.T) {
		s := open(t)
		if err := saveDoc(t, s, []byte("doc"), 1); !errors.Is(err, catalog.ErrConflict) {
			t.Errorf("SaveCatalog(ifVersion 1) on an empty store = %v; want ErrConflict", err)
		}
	})

	t.Run("CallerCannotMutateStoredDocument", func(t *testing.T) {
		s := open(t)
		doc := []byte("original")
		if err := saveDoc(t, s, doc, 0); err != nil {
			t.Fatal(err)
		}
		copy(doc, "MUTATED!")
		loaded, _, err := s.LoadCatalog(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		copy(loaded, "MUTATED!")
		wantLatest(t, s, "original", 1)
	})

	t.Run("ConcurrentSavesTakeDistinctVersions", func(t *testing.T) {
		s := open(t)
		const n = 8
		versions := make(chan int64, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				v, err := s.SaveCatalog(t.Context(), catalog.CatalogVersion{Doc: fmt.Appendf(nil, "doc %d", i)}, 0)
				if err != nil {
					t.Errorf("concurrent SaveCatalog(ifVersion 0) = %v", err)
				}
				versions <- v.Version
			})
		}
		wg.Wait()
		close(versions)
		seen := make(map[int64]bool)
		for v := range versions {
			if v < 1 || v > n || seen[v] {
				t.Errorf("concurrent SaveCatalog returned version %d twice or out of 1..%d", v, n)
			}
			seen[v] = true
		}
		if _, v, err := s.LoadCatalog(t.Context()); err != nil || v != n {
			t.Errorf("LoadCatalog version = %d, %v; want %d", v, err, n)
		}
	})

	t.Run("ConcurrentIfVersionSavesHaveOneWinner", func(t *testing.T) {
		s := open(t)
		mustSaveCatalog(t, s, "base", 0)
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []string
		for i := range n {
			wg.Go(func() {
				doc := fmt.Sprintf("doc %d", i)
				err := saveDoc(t, s, []byte(doc), 1)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, doc)
					mu.Unlock()
				case !errors.Is(err, catalog.ErrConflict):
					t.Errorf("concurrent SaveCatalog(ifVersion 1) = %v, want nil or ErrConflict", err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("%d saves with ifVersion 1 succeeded (%q), want exactly 1", len(won), won)
		}
		wantLatest(t, s, won[0], 2)
	})
}
