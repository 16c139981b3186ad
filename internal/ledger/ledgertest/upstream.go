package ledgertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// runUpstream checks UpstreamReport: executions count by their own
// account, credential, status and start (not their request's), tokens
// only when measured, and the range is From inclusive, To exclusive.
func runUpstream(t *testing.T, open func(t *testing.T) ledger.Usage) {
	u := open(t)
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	exec := func(account, credential string, status sluice.ExecutionStatus, started time.Time, prompt, cached int64) sluice.Execution {
		x := sluice.Execution{AccountID: account, CredentialID: credential, Status: status, Started: started, Duration: 250 * time.Millisecond}
		if prompt > 0 {
			x.Usage = sluice.Usage{PromptTokens: prompt, CachedTokens: cached, TotalTokens: prompt + 5, Measured: true}
		}
		return x
	}
	estimated := exec("org-a", "k2", sluice.ExecutionEndpoint, t0.Add(3*time.Minute), 0, 0)
	estimated.Usage = sluice.Usage{PromptTokens: 999} // an estimate, not measured: counts no tokens
	rec := func(id string, execs ...sluice.Execution) sluice.UsageRecord {
		return sluice.UsageRecord{RequestID: id, Started: execs[0].Started, Executions: execs}
	}
	record(t, u,
		// k1 throttled, then k2 serves: one request, two accounts' worth of rows.
		rec("r1", exec("org-a", "k1", sluice.ExecutionRate, t0, 0, 0), exec("org-a", "k2", sluice.ExecutionOK, t0.Add(time.Second), 1000, 600)),
		rec("r2", exec("org-a", "k1", sluice.ExecutionRate, t0.Add(time.Minute), 0, 0), exec("org-b", "k9", sluice.ExecutionOK, t0.Add(time.Minute), 400, 0)),
		rec("r3", exec("org-a", "k2", sluice.ExecutionOK, t0.Add(2*time.Minute), 500, 100)),
		rec("r4", estimated),
		// Its request started before t0+4m; the execution after: the execution's start counts.
		rec("r5", exec("org-a", "k1", sluice.ExecutionOK, t0.Add(3*time.Minute+59*time.Second), 300, 0),
			exec("org-a", "k1", sluice.ExecutionOK, t0.Add(4*time.Minute), 200, 200)),
	)
	ms250 := 250 * time.Millisecond
	tests := []struct {
		name string
		give ledger.UpstreamFilter
		want []ledger.UpstreamRow
	}{
		{"Everything", ledger.UpstreamFilter{Account: "org-a"}, []ledger.UpstreamRow{
			{Credential: "k1", Status: sluice.ExecutionOK, Executions: 2, PromptTokens: 500, CachedTokens: 200, Duration: 2 * ms250},
			{Credential: "k1", Status: sluice.ExecutionRate, Executions: 2, Duration: 2 * ms250},
			{Credential: "k2", Status: sluice.ExecutionEndpoint, Executions: 1, Duration: ms250},
			{Credential: "k2", Status: sluice.ExecutionOK, Executions: 2, PromptTokens: 1500, CachedTokens: 700, Duration: 2 * ms250},
		}},
		{"OtherAccount", ledger.UpstreamFilter{Account: "org-b"}, []ledger.UpstreamRow{
			{Credential: "k9", Status: sluice.ExecutionOK, Executions: 1, PromptTokens: 400, Duration: ms250},
		}},
		{"FromInclusiveToExclusive", ledger.UpstreamFilter{Account: "org-a", From: t0.Add(time.Minute), To: t0.Add(4 * time.Minute)}, []ledger.UpstreamRow{
			{Credential: "k1", Status: sluice.ExecutionOK, Executions: 1, PromptTokens: 300, Duration: ms250},
			{Credential: "k1", Status: sluice.ExecutionRate, Executions: 1, Duration: ms250},
			{Credential: "k2", Status: sluice.ExecutionEndpoint, Executions: 1, Duration: ms250},
			{Credential: "k2", Status: sluice.ExecutionOK, Executions: 1, PromptTokens: 500, CachedTokens: 100, Duration: ms250},
		}},
		{"ZoneOfTheFilter", ledger.UpstreamFilter{Account: "org-a", From: t0.Add(4 * time.Minute).In(time.FixedZone("CET", 3600))}, []ledger.UpstreamRow{
			{Credential: "k1", Status: sluice.ExecutionOK, Executions: 1, PromptTokens: 200, CachedTokens: 200, Duration: ms250},
		}},
		{"UnknownAccount", ledger.UpstreamFilter{Account: "org-z"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := u.UpstreamReport(t.Context(), tt.give)
			if err != nil {
				t.Fatalf("UpstreamReport(%+v) = %v", tt.give, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UpstreamReport(%+v) mismatch (-want +got):\n%s", tt.give, diff)
			}
		})
	}
	t.Run("NoAccount", func(t *testing.T) {
		if _, err := u.UpstreamReport(t.Context(), ledger.UpstreamFilter{From: t0}); err == nil {
			t.Error("UpstreamReport without an account = nil error, want one")
		}
	})
}
