package sqlcatalog_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/catalog/catalogtest"
	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

func TestContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		catalogtest.Run(t, func(t *testing.T) catalogtest.Store {
			return sqlcatalog.New(sqldbtest.Open(t, url(t)))
		})
	})
}

// TestClosedDatabaseReturnsErrors checks that a store whose database has
// gone away fails each call instead of hanging or panicking.
func TestClosedDatabaseReturnsErrors(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		db, err := sqldb.Open(t.Context(), url(t))
		if err != nil {
			t.Fatal(err)
		}
		s := sqlcatalog.New(db)
		db.Close()
		ctx := t.Context()
		if err := s.SaveKey(ctx, &sluice.Key{ID: "k", Hash: "h"}); err == nil {
			t.Error("SaveKey = nil, want an error")
		}
		if _, err := s.LoadKey(ctx, "k"); err == nil {
			t.Error("LoadKey = nil error, want an error")
		}
		if _, err := s.ListKeys(ctx); err == nil {
			t.Error("ListKeys = nil error, want an error")
		}
		if _, err := s.SaveCatalog(ctx, catalog.CatalogVersion{Doc: []byte("doc")}, 0); err == nil {
			t.Error("SaveCatalog = nil error, want an error")
		}
		if _, _, err := s.LoadCatalog(ctx); err == nil {
			t.Error("LoadCatalog = nil error, want an error")
		}
		if _, err := s.LoadCatalogVersion(ctx, 1); err == nil {
			t.Error("LoadCatalogVersion = nil error, want an error")
		}
		if _, err := s.ListCatalogVersions(ctx, 0); err == nil {
			t.Error("ListCatalogVersions = nil error, want an error")
		}
		if _, err := s.LatestCatalogVersion(ctx); err == nil {
			t.Error("LatestCatalogVersion = nil error, want an error")
		}
		if err := s.BeatReplica(ctx, catalog.Replica{ID: "r", SeenAt: time.Now()}); err == nil {
			t.Error("BeatReplica = nil, want an error")
		}
		if _, err := s.ListReplicas(ctx, time.Time{}); err == nil {
			t.Error("ListReplicas = nil error, want an error")
		}
		if _, err := s.PruneReplicas(ctx, time.Now()); err == nil {
			t.Error("PruneReplicas = nil error, want an error")
		}
	})
}

// TestSettingsColumnIsStable checks the settings column against the JSON
// earlier builds wrote and read, so that rows stay readable both ways
// while replicas of two builds share a database.
func TestSettingsColumnIsStable(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		db := sqldbtest.Open(t, url(t))
		k := &sluice.Key{ID: "k", Hash: "h", Budgets: sluice.Budgets{Day: 5_000_000}}
		k.KeySettings = sluice.KeySettings{
			Labels: map[string]string{"team": "a"},
			Policy: sluice.RoutePolicy{Mode: "preferred", Accounts: []string{"a"}, Fallback: "any", Wait: sluice.Duration(1500 * time.Millisecond)},
			Limits: sluice.Limits{RPM: 60}, UserLimits: sluice.Limits{RPM: 6}, Task: "chat", Tasks: []string{"batch"},
			Paths: []string{"chat"}, ServiceTiers: []string{"flex"}, OnLimit: "refuse", BillingAccount: "acme", Assert: []string{"user"},
		}
		if err := sqlcatalog.New(db).SaveKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		var column string
		if err := db.QueryRow(t.Context(), `SELECT settings FROM keys WHERE id = ?`, "k").Scan(&column); err != nil {
			t.Fatal(err)
		}
		const want = `{"policy":{"mode":"preferred","accounts":["a"],"fallback":"any","wait_us":1500000},"limits":{"rpm":60},
			"user_limits":{"rpm":6},"task":"chat","tasks":["batch"],"paths":["chat"],"service_tiers":["flex"],"on_limit":"refuse",
			"billing_account":"acme","budgets":{"day_micros":5000000},"assert":["user"]}`
		var got, wantV any
		if err := json.Unmarshal([]byte(column), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want), &wantV); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantV, got); diff != "" {
			t.Errorf("settings column (-earlier builds +now):\n%s", diff)
		}
	})
}
