package ledger

import (
	"cmp"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// UpstreamFilter selects the executions that ran on one upstream account
// (never a billing account) and started in [From, To); a zero From or To
// leaves that end open. Account is required.
type UpstreamFilter struct {
	Account  string
	From, To time.Time
}

// Validate reports a filter without an account: an upstream report is of
// one account, whose executions an index finds by their start.
func (f UpstreamFilter) Validate() error {
	if f.Account == "" {
		return errors.New("upstream report: no account")
	}
	return nil
}

// Selects reports whether f selects an execution x.
func (f UpstreamFilter) Selects(x *sluice.Execution) bool {
	return x.AccountID == f.Account && PolicyFilter{From: f.From, To: f.To}.Selects("", x.Started)
}

// UpstreamRow sums the executions of one credential of the account that
// ended in one status (rate for a throttle, whatever its HTTP status;
// ok, auth, billing, endpoint, request, cancelled otherwise).
type UpstreamRow struct {
	Credential string
	Status     sluice.ExecutionStatus
	Executions int64
	// PromptTokens and CachedTokens (of PromptTokens, read from the
	// upstream's prompt cache) sum the measured usage of the executions;
	// one whose usage was not measured adds nothing.
	PromptTokens, CachedTokens int64
	// Duration sums the executions' durations.
	Duration time.Duration
}

// CompareUpstreamRows orders rows by credential and status: the order
// UpstreamReport returns.
func CompareUpstreamRows(a, b UpstreamRow) int {
	return cmp.Or(cmp.Compare(a.Credential, b.Credential), cmp.Compare(a.Status, b.Status))
}
