package memledger

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// CacheReport groups the executions of the selected records.
func (s *Store) CacheReport(_ context.Context, f ledger.CacheFilter) ([]ledger.CacheRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	index := make(map[ledger.CacheRow]int) // the row's dimensions → position in out
	var out []ledger.CacheRow
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if !f.Selects(r.Started) {
			continue
		}
		for seq, e := range r.Executions {
			g := cacheGroup(&r, &e, f.By)
			i, ok := index[g]
			if !ok {
				i = len(out)
				index[g] = i
				out = append(out, g)
			}
			row := &out[i]
			if seq == 0 {
				row.Requests++
				switch r.Affinity {
				case sluice.PlacementHit:
					row.Hits++
				case sluice.PlacementNew:
					row.New++
				case sluice.PlacementMoved:
					row.Moved++
				}
			}
			if u := e.Usage; u.Measured {
				row.PromptTokens += u.PromptTokens
				row.CachedTokens += u.CachedTokens
				row.CacheWriteTokens += u.CacheWriteTokens
			}
		}
	}
	slices.SortFunc(out, ledger.CompareCacheRows)
	return out, nil
}

// cacheGroup is the row, without sums, that execution e of r falls in when
// grouped by dims.
func cacheGroup(r *sluice.UsageRecord, e *sluice.Execution, dims []ledger.Dimension) ledger.CacheRow {
	var g ledger.CacheRow
	for _, d := range dims {
		switch d {
		case ledger.ByAccount:
			g.Account = e.AccountID
		case ledger.ByAlias:
			g.Alias = r.Alias
		case ledger.ByDay:
			g.Day = ledger.Day(r.Started)
		}
	}
	return g
}
