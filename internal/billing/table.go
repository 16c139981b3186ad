package billing

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Kind says what a Price is the price of.
type Kind string

// The kinds of price.
const (
	// KindPrice is what a plan's customers pay for an alias.
	KindPrice Kind = "price"
	// KindCost is what the platform pays upstream for a deployment model.
	KindCost Kind = "cost"
)

// Price is one version of the rates of (Plan, Alias) for KindPrice or of
// Model for KindCost, in force from EffectiveFrom until the next version's.
// Prices come from the catalog and from the store (the admin API); a Table
// holds both.
type Price struct {
	Kind          Kind
	Plan, Alias   string // KindPrice only
	Model         string // KindCost only
	EffectiveFrom time.Time
	Rates         Rates

	version string // Version, kept by NewTable: every charged request records it
}

// Version is the price's stable id, recorded on every usage record charged
// at it: "<plan>/<alias>@<effective_from>" for a price, "<model>@<effective_from>"
// for a cost, the time in RFC 3339 UTC.
func (p *Price) Version() string {
	if p.version != "" {
		return p.version
	}
	at := "@" + p.EffectiveFrom.UTC().Format(time.RFC3339Nano)
	if p.Kind == KindCost {
		return p.Model + at
	}
	return p.Plan + "/" + p.Alias + at
}

// Validate reports a price that names the wrong things for its kind, has
// no effective time, or has a negative rate.
func (p *Price) Validate() error {
	switch {
	case p.Kind == KindPrice && (p.Plan == "" || p.Alias == "" || p.Model != ""):
		return errors.New("price: want a plan and an alias, and no model")
	case p.Kind == KindCost && (p.Model == "" || p.Plan != "" || p.Alias != ""):
		return errors.New("cost: want a model, and no plan or alias")
	case p.Kind != KindPrice && p.Kind != KindCost:
		return fmt.Errorf("price kind %q: want %q or %q", p.Kind, KindPrice, KindCost)
	case p.EffectiveFrom.IsZero():
		return fmt.Errorf("%s %s: effective_from is required", p.Kind, p.Version())
	}
	if err := p.Rates.Validate(); err != nil {
		return fmt.Errorf("%s %s: %w", p.Kind, p.Version(), err)
	}
	return nil
}

// series names what the versions of one price are versions of.
type series struct {
	kind               Kind
	plan, alias, model string
}

// Table holds every version of every price and cost, and answers which
// was in force at a time. It is immutable once built and safe for
// concurrent use; a nil *Table has no prices.
type Table struct {
	versions map[series][]Price // each oldest first
}

// NewTable builds a table from prices, in any order: the catalog's and the
// store's together. Two versions of one series with the same EffectiveFrom
// are one version given twice if their rates agree, and an error if they do
// not (which one is in force would otherwise depend on the order prices
// were read in). So is a price that is not valid.
func NewTable(prices []Price) (*Table, error) {
	t := &Table{versions: make(map[series][]Price)}
	for _, p := range prices {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		p.EffectiveFrom = p.EffectiveFrom.UTC()
		p.version = "" // a price taken from another table may have been changed since
		p.version = p.Version()
		k := series{p.Kind, p.Plan, p.Alias, p.Model}
		t.versions[k] = append(t.versions[k], p)
	}
	for k, vs := range t.versions {
		slices.SortStableFunc(vs, func(a, b Price) int { return a.EffectiveFrom.Compare(b.EffectiveFrom) })
		out := vs[:1]
		for _, v := range vs[1:] {
			last := &out[len(out)-1]
			switch {
			case !v.EffectiveFrom.Equal(last.EffectiveFrom):
				out = append(out, v)
			case v.Rates != last.Rates:
				return nil, fmt.Errorf("%s %s is given twice with different rates", v.Kind, v.Version())
			}
		}
		t.versions[k] = out
	}
	return t, nil
}

// Merge builds the table of the catalog's prices and the stored ones (the
// admin API's). The catalog wins: a stored version that is not valid, or
// that the catalog gives at the same instant with other rates, is left
// out and reported in dropped, so that one bad row never takes the others
// down with it. err is the catalog's own prices failing NewTable.
func Merge(catalog, stored []Price) (t *Table, dropped []error, err error) {
	declared, err := NewTable(catalog)
	if err != nil {
		return nil, nil, err
	}
	all := slices.Clip(catalog)
	for _, p := range stored {
		if err := p.Validate(); err != nil {
			dropped = append(dropped, err)
			continue
		}
		k := series{p.Kind, p.Plan, p.Alias, p.Model}
		i := slices.IndexFunc(declared.versions[k], func(d Price) bool { return d.EffectiveFrom.Equal(p.EffectiveFrom) })
		if i >= 0 && declared.versions[k][i].Rates != p.Rates {
			dropped = append(dropped, fmt.Errorf("%s %s is in the catalog with other rates", p.Kind, p.Version()))
			continue
		}
		all = append(all, p)
	}
	t, err = NewTable(all) // the store keeps one version per instant: this fails only on a store that contradicts itself
	return t, dropped, err
}

// Price is the price of alias under plan in force at at: the version with
// the latest EffectiveFrom not after at. ok is false when there is none.
// p is the table's own (every request is priced, and a Price is large):
// the caller must not change it.
func (t *Table) Price(plan, alias string, at time.Time) (p *Price, ok bool) {
	return t.at(series{kind: KindPrice, plan: plan, alias: alias}, at)
}

// Cost is the cost of the deployment model in force at at, as Price.
func (t *Table) Cost(model string, at time.Time) (p *Price, ok bool) {
	return t.at(series{kind: KindCost, model: model}, at)
}

func (t *Table) at(k series, at time.Time) (*Price, bool) {
	if t == nil {
		return nil, false
	}
	vs := t.versions[k]
	// The first version effective after at; the one before it is in force.
	i, _ := slices.BinarySearchFunc(vs, at, func(v Price, at time.Time) int {
		if v.EffectiveFrom.After(at) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return nil, false
	}
	return &vs[i-1], true
}

// All returns every version, ordered by kind, plan, alias, model and
// effective time.
func (t *Table) All() []Price {
	if t == nil {
		return nil
	}
	var out []Price
	for _, vs := range t.versions {
		out = append(out, vs...)
	}
	slices.SortFunc(out, func(a, b Price) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Plan, b.Plan), cmp.Compare(a.Alias, b.Alias),
			cmp.Compare(a.Model, b.Model), a.EffectiveFrom.Compare(b.EffectiveFrom))
	})
	return out
}
