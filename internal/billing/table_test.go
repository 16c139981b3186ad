package billing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/billing"
)

var dec1 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func price(plan, alias string, from time.Time, input billing.Micros) billing.Price {
	return billing.Price{Kind: billing.KindPrice, Plan: plan, Alias: alias, EffectiveFrom: from, Rates: billing.Rates{Input: input}}
}

func cost(model string, from time.Time, input billing.Micros) billing.Price {
	return billing.Price{Kind: billing.KindCost, Model: model, EffectiveFrom: from, Rates: billing.Rates{Input: input}}
}

func TestTableVersionInForce(t *testing.T) {
	later := dec1.Add(48 * time.Hour)
	// Out of order, catalog and store mixed, one version given twice, a
	// zone other than UTC.
	tab, err := billing.NewTable([]billing.Price{
		price("standard", "fast", later.In(time.FixedZone("CET", 3600)), 2),
		cost("gpt-4o-mini", dec1, 10),
		price("standard", "fast", dec1, 1),
		price("premium", "fast", dec1, 5),
		price("standard", "fast", dec1, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		plan, alias string
		at          time.Time
		wantInput   billing.Micros
		wantVersion string // "" = none in force
	}{
		{"BeforeTheFirst", "standard", "fast", dec1.Add(-time.Nanosecond), 0, ""},
		{"FromIsInclusive", "standard", "fast", dec1, 1, "standard/fast@2026-12-01T00:00:00Z"},
		{"BetweenVersions", "standard", "fast", later.Add(-time.Nanosecond), 1, "standard/fast@2026-12-01T00:00:00Z"},
		{"TheNextVersion", "standard", "fast", later, 2, "standard/fast@2026-12-03T00:00:00Z"},
		{"LongAfter", "standard", "fast", later.AddDate(5, 0, 0), 2, "standard/fast@2026-12-03T00:00:00Z"},
		{"OtherPlan", "premium", "fast", later, 5, "premium/fast@2026-12-01T00:00:00Z"},
		{"UnknownAlias", "standard", "slow", later, 0, ""},
		{"UnknownPlan", "free", "fast", later, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tab.Price(tt.plan, tt.alias, tt.at)
			if tt.wantVersion == "" {
				if ok {
					t.Fatalf("Price(%s, %s, %v) = %s, want none", tt.plan, tt.alias, tt.at, p.Version())
				}
				return
			}
			if !ok || p.Version() != tt.wantVersion || p.Rates.Input != tt.wantInput {
				t.Errorf("Price(%s, %s, %v) = %s input %d, %v; want %s input %d", tt.plan, tt.alias, tt.at,
					p.Version(), p.Rates.Input, ok, tt.wantVersion, tt.wantInput)
			}
		})
	}
	if c, ok := tab.Cost("gpt-4o-mini", later); !ok || c.Version() != "gpt-4o-mini@2026-12-01T00:00:00Z" || c.Rates.Input != 10 {
		t.Errorf("Cost(gpt-4o-mini) = %s %+v, %v", c.Version(), c.Rates, ok)
	}
	if _, ok := tab.Cost("fast", later); ok {
		t.Error("Cost of an alias name found a price: costs and prices must not mix")
	}
	if n := len(tab.All()); n != 4 {
		t.Errorf("All() has %d versions, want 4 (the twice-given one once)", n)
	}
}

func TestNilTableHasNoPrices(t *testing.T) {
	var tab *billing.Table
	if _, ok := tab.Price("standard", "fast", dec1); ok {
		t.Error("nil Table has a price")
	}
	if _, ok := tab.Cost("m", dec1); ok {
		t.Error("nil Table has a cost")
	}
}

func TestNewTableRefuses(t *testing.T) {
	tests := []struct {
		name    string
		give    []billing.Price
		wantErr string
	}{
		{"SameTimeDifferentRates", []billing.Price{price("standard", "fast", dec1, 1), price("standard", "fast", dec1.In(time.FixedZone("X", 7200)), 2)},
			"standard/fast@2026-12-01T00:00:00Z is given twice with different rates"},
		{"NoEffectiveTime", []billing.Price{price("standard", "fast", time.Time{}, 1)}, "effective_from is required"},
		{"PriceWithoutAlias", []billing.Price{price("standard", "", dec1, 1)}, "want a plan and an alias"},
		{"CostWithPlan", []billing.Price{{Kind: billing.KindCost, Model: "m", Plan: "p", EffectiveFrom: dec1}}, "want a model, and no plan"},
		{"UnknownKind", []billing.Price{{Kind: "sale", Plan: "p", Alias: "a", EffectiveFrom: dec1}}, `price kind "sale"`},
		{"NegativeRate", []billing.Price{{Kind: billing.KindCost, Model: "m", EffectiveFrom: dec1, Rates: billing.Rates{VideoItem: -1}}},
			"video_item: -0.000001 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := billing.NewTable(tt.give); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewTable = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// Merge keeps the stored versions beside the catalog's, and where the
// catalog gives the same instant with other rates, or a stored version is
// not valid, leaves the stored one out and says so; the others still count.
func TestMergeCatalogWins(t *testing.T) {
	later := dec1.Add(time.Hour)
	catalog := []billing.Price{price("standard", "fast", dec1, 1)}
	stored := []billing.Price{
		price("standard", "fast", dec1, 9), // conflicts: the catalog's stays
		price("standard", "fast", later, 2),
		price("gold", "fast", dec1, 3),
		{Kind: billing.KindPrice, Plan: "gold", EffectiveFrom: dec1}, // no alias
		price("standard", "fast", dec1, 1),                           // the catalog's own version again: fine
	}
	tab, dropped, err := billing.Merge(catalog, stored)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 || !strings.Contains(dropped[0].Error(), "standard/fast@2026-12-01T00:00:00Z is in the catalog with other rates") {
		t.Errorf("dropped = %v, want the conflicting version and the one without alias", dropped)
	}
	for _, tt := range []struct {
		plan string
		at   time.Time
		want billing.Micros
	}{{"standard", dec1, 1}, {"standard", later, 2}, {"gold", later, 3}} {
		if p, ok := tab.Price(tt.plan, "fast", tt.at); !ok || p.Rates.Input != tt.want {
			t.Errorf("%s at %s = %+v, %v; want input %d", tt.plan, tt.at, p, ok, tt.want)
		}
	}
	if _, _, err := billing.Merge([]billing.Price{catalog[0], price("standard", "fast", dec1, 2)}, nil); err == nil {
		t.Error("Merge of a catalog that contradicts itself succeeded")
	}
}

// The version of a price from a table is recorded on every charged request:
// it is made once, when the table is built, not on every request.
func TestTableVersionAllocatesNothing(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tbl, err := billing.NewTable([]billing.Price{{Kind: billing.KindPrice, Plan: "standard", Alias: "fast", EffectiveFrom: at}})
	if err != nil {
		t.Fatal(err)
	}
	var v string
	allocs := testing.AllocsPerRun(100, func() {
		p, _ := tbl.Price("standard", "fast", at.Add(time.Hour))
		v = p.Version()
	})
	if allocs != 0 || v != "standard/fast@2026-12-01T00:00:00Z" {
		t.Errorf("Version() = %q with %v allocations per call, want standard/fast@2026-12-01T00:00:00Z with none", v, allocs)
	}
}
