package catalogtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/internal/catalog"
)

// versionOpts compare versions as stored: instants, not locations.
var versionOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

func mustSaveVersion(t *testing.T, s Store, next catalog.CatalogVersion) catalog.CatalogVersion {
	t.Helper()
	v, err := s.SaveCatalog(t.Context(), next, 0)
	if err != nil {
		t.Fatalf("SaveCatalog(%q) = %v", next.Doc, err)
	}
	return v
}

func mustLoadVersion(t *testing.T, s Store, version int64) catalog.CatalogVersion {
	t.Helper()
	v, err := s.LoadCatalogVersion(t.Context(), version)
	if err != nil {
		t.Fatalf("LoadCatalogVersion(%d) = %v", version, err)
	}
	return v
}

func runVersions(t *testing.T, open func(t *testing.T) Store) {
	t.Run("SaveRecordsAuthorSizeAndDiff", func(t *testing.T) {
		s := open(t)
		before := time.Now().Add(-time.Second)
		first := mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("a: 1\nb: 2\n"), By: "ops"})
		if first.Version != 1 || first.By != "ops" || first.Bytes != 10 || first.LinesAdded != 2 || first.LinesRemoved != 0 ||
			!strings.HasPrefix(first.Diff, "--- /dev/null\n+++ catalog@1\n") {
			t.Errorf("first version = %+v, want version 1 by ops, 10 bytes, 2 lines added from /dev/null", first)
		}
		second := mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("a: 1\nc: 3\nd: 4\n"), By: "deploy"})
		after := time.Now().Add(time.Second)
		const wantDiff = "--- catalog@1\n+++ catalog@2\n@@ -1,2 +1,3 @@\n a: 1\n-b: 2\n+c: 3\n+d: 4\n"
		if second.Version != 2 || second.By != "deploy" || second.Bytes != 15 || second.LinesAdded != 2 || second.LinesRemoved != 1 {
			t.Errorf("second version = %+v, want version 2 by deploy, 15 bytes, +2 -1", second)
		}
		if second.Diff != wantDiff {
			t.Errorf("second version's diff = %q, want %q", second.Diff, wantDiff)
		}
		if second.At.Before(before) || second.At.After(after) || second.At.Location() != time.UTC {
			t.Errorf("second version At = %v, want now, in UTC", second.At)
		}
	})

	t.Run("LoadVersionReturnsWhatSaveReturned", func(t *testing.T) {
		s := open(t)
		saved := []catalog.CatalogVersion{
			mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("one\n"), By: "a"}),
			mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("two\n"), By: "b"}),
			mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("one\n"), By: "c", RollbackOf: 1}),
		}
		for _, want := range saved {
			if diff := cmp.Diff(want, mustLoadVersion(t, s, want.Version), versionOpts); diff != "" {
				t.Errorf("LoadCatalogVersion(%d) mismatch (-saved +loaded):\n%s", want.Version, diff)
			}
		}
		if got := mustLoadVersion(t, s, 3); got.RollbackOf != 1 || string(got.Doc) != "one\n" {
			t.Errorf("version 3 = %+v, want version 1's document, rollback of 1", got)
		}
	})

	t.Run("LoadMissingVersionIsNotFound", func(t *testing.T) {
		s := open(t)
		mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("one\n")})
		for _, v := range []int64{-1, 0, 2} {
			if got, err := s.LoadCatalogVersion(t.Context(), v); !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("LoadCatalogVersion(%d) = %+v, %v; want ErrNotFound", v, got, err)
			}
		}
	})

	t.Run("EqualDocumentHasNoDiff", func(t *testing.T) {
		s := open(t)
		mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("same\n")})
		if v := mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("same\n")}); v.Version != 2 || v.Diff != "" || v.LinesAdded != 0 || v.LinesRemoved != 0 {
			t.Errorf("saving the same document again = %+v, want version 2 with an empty diff", v)
		}
	})

	t.Run("ListIsNewestFirstWithoutDocuments", func(t *testing.T) {
		s := open(t)
		if vs, err := s.ListCatalogVersions(t.Context(), 0); err != nil || len(vs) != 0 {
			t.Fatalf("ListCatalogVersions of an empty store = %v, %v; want none", vs, err)
		}
		var want []catalog.CatalogVersion
		for _, doc := range []string{"a\n", "a\nb\n", "b\n"} {
			v := mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte(doc), By: "ops"})
			v.Doc, v.Diff = nil, ""
			want = append([]catalog.CatalogVersion{v}, want...)
		}
		all, err := s.ListCatalogVersions(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, all, versionOpts); diff != "" {
			t.Errorf("ListCatalogVersions(0) mismatch (-want +got):\n%s", diff)
		}
		two, err := s.ListCatalogVersions(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[:2], two, versionOpts); diff != "" {
			t.Errorf("ListCatalogVersions(2) mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("LatestVersion", func(t *testing.T) {
		s := open(t)
		for want := range int64(3) {
			if got, err := s.LatestCatalogVersion(t.Context()); err != nil || got != want {
				t.Errorf("LatestCatalogVersion = %d, %v; want %d", got, err, want)
			}
			mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("doc\n")})
		}
	})

	t.Run("CallerCannotMutateLoadedVersion", func(t *testing.T) {
		s := open(t)
		mustSaveVersion(t, s, catalog.CatalogVersion{Doc: []byte("original")})
		loaded := mustLoadVersion(t, s, 1)
		copy(loaded.Doc, "MUTATED!")
		if got := mustLoadVersion(t, s, 1); string(got.Doc) != "original" {
			t.Errorf("version 1 after a caller changed its copy = %q, want original", got.Doc)
		}
	})
}

// beat is a heartbeat at minute of at's hour.
func beat(id string, minute int) catalog.Replica {
	return catalog.Replica{ID: id, Source: "store", Version: 3, Since: at(1), SeenAt: at(minute)}
}

func runReplicas(t *testing.T, open func(t *testing.T) Store) {
	list := func(t *testing.T, s Store, since time.Time) []catalog.Replica {
		t.Helper()
		rs, err := s.ListReplicas(t.Context(), since)
		if err != nil {
			t.Fatalf("ListReplicas = %v", err)
		}
		return rs
	}
	mustBeat := func(t *testing.T, s Store, r catalog.Replica) {
		t.Helper()
		if err := s.BeatReplica(t.Context(), r); err != nil {
			t.Fatalf("BeatReplica(%s) = %v", r.ID, err)
		}
	}

	t.Run("BeatReplacesByIDAndRoundTrips", func(t *testing.T) {
		s := open(t)
		mustBeat(t, s, beat("r1", 10))
		want := catalog.Replica{ID: "r1", Source: "file:/etc/sluice.yaml", Version: 4, Since: at(11),
			LastError: "models[0]: env FOO is not set", LastErrorAt: at(12), SeenAt: at(13)}
		mustBeat(t, s, want)
		got := list(t, s, time.Time{})
		if diff := cmp.Diff([]catalog.Replica{want}, got, versionOpts); diff != "" {
			t.Errorf("ListReplicas mismatch (-want +got):\n%s", diff)
		}
		if len(got) == 1 && (got[0].SeenAt.Location() != time.UTC || got[0].Since.Location() != time.UTC) {
			t.Errorf("times = %v, %v; want UTC", got[0].SeenAt, got[0].Since)
		}
	})

	t.Run("ZeroTimesStayZero", func(t *testing.T) {
		s := open(t)
		mustBeat(t, s, catalog.Replica{ID: "r1", Source: "demo", SeenAt: at(5)})
		if got := list(t, s, time.Time{}); len(got) != 1 || !got[0].Since.IsZero() || !got[0].LastErrorAt.IsZero() {
			t.Errorf("ListReplicas = %+v, want one with zero Since and LastErrorAt", got)
		}
	})

	t.Run("ListSelectsSeenSinceByID", func(t *testing.T) {
		s := open(t)
		for _, r := range []catalog.Replica{beat("c", 20), beat("a", 21), beat("b", 5), beat("d", 20)} {
			mustBeat(t, s, r)
		}
		var ids []string
		for _, r := range list(t, s, at(20)) {
			ids = append(ids, r.ID)
		}
		if diff := cmp.Diff([]string{"a", "c", "d"}, ids); diff != "" {
			t.Errorf("ListReplicas(since minute 20) (-want +got):\n%s", diff)
		}
	})

	t.Run("PruneDeletesOnlyStaleRows", func(t *testing.T) {
		s := open(t)
		for _, r := range []catalog.Replica{beat("old", 1), beat("older", 0), beat("fresh", 30)} {
			mustBeat(t, s, r)
		}
		n, err := s.PruneReplicas(t.Context(), at(10))
		if err != nil || n != 2 {
			t.Errorf("PruneReplicas = %d, %v; want 2, nil", n, err)
		}
		if got := list(t, s, time.Time{}); len(got) != 1 || got[0].ID != "fresh" {
			t.Errorf("after pruning: %+v, want only fresh", got)
		}
	})
}
