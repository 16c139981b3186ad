package memledger

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// UpstreamReport sums the executions f selects by credential and status.
func (s *Store) UpstreamReport(_ context.Context, f ledger.UpstreamFilter) ([]ledger.UpstreamRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	type group struct {
		credential string
		status     sluice.ExecutionStatus
	}
	index := make(map[group]int) // position in out
	var out []ledger.UpstreamRow
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		for i := range r.Executions {
			x := &r.Executions[i]
			if !f.Selects(x) {
				continue
			}
			g := group{x.CredentialID, x.Status}
			at, ok := index[g]
			if !ok {
				at = len(out)
				index[g] = at
				out = append(out, ledger.UpstreamRow{Credential: x.CredentialID, Status: x.Status})
			}
			row := &out[at]
			row.Executions++
			row.Duration += x.Duration
			if x.Usage.Measured {
				row.PromptTokens += x.Usage.PromptTokens
				row.CachedTokens += x.Usage.CachedTokens
			}
		}
	}
	slices.SortFunc(out, ledger.CompareUpstreamRows)
	return out, nil
}
