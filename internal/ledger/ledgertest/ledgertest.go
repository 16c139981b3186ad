// Package ledgertest is the contract suite every ledger.Usage store must
// pass: memledger and sqlledger (on SQLite and PostgreSQL) run the same cases.
//
// It is imported by tests only, and must not depend on any implementation.
package ledgertest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Run checks the behaviour every ledger.Usage must have. open returns a
// new, empty store for each case; it is called once per subtest.
func Run(t *testing.T, open func(t *testing.T) ledger.Usage) {
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		u := open(t)
		want := newRecord("r1", 0)
		record(t, u, want)
		wantList(t, u, time.Time{}, 0, want)
	})

	t.Run("RoundTripsRecordWithoutExecutions", func(t *testing.T) {
		u := open(t)
		want := sluice.UsageRecord{RequestID: "bare", Started: at(0), Code: sluice.CodeNoCredentials, Status: 401}
		record(t, u, want)
		wantList(t, u, time.Time{}, 0, want)
	})

	t.Run("RoundTripsJobUsage", func(t *testing.T) {
		u := open(t)
		job := newRecord("video_1", 0)
		job.Job = &sluice.JobUsage{State: "completed", Submitted: at(1), Running: at(2), Ended: at(9), Seconds: 8}
		never := newRecord("video_2", 1)
		never.Job = &sluice.JobUsage{State: "expired", Submitted: at(1), Ended: at(30)} // never seen running
		record(t, u, job, never)
		wantList(t, u, time.Time{}, 0, job, never)
	})

	t.Run("ReturnsUTC", func(t *testing.T) {
		u := open(t)
		record(t, u, newRecord("r1", 0))
		got := list(t, u, time.Time{}, 0)
		if len(got) != 1 || len(got[0].Executions) == 0 {
			t.Fatalf("ListUsage = %v, want one record with executions", got)
		}
		if loc := got[0].Started.Location(); loc != time.UTC {
			t.Errorf("Started location = %v, want UTC", loc)
		}
		if loc := got[0].Executions[0].Started.Location(); loc != time.UTC {
			t.Errorf("Executions[0].Started location = %v, want UTC", loc)
		}
	})

	t.Run("SecondWriteChangesNothing", func(t *testing.T) {
		u := open(t)
		want := newRecord("r1", 0)
		record(t, u, want)
		// The same record again, as the spool replays it after a failed
		// write: its RequestID and its start (fixed when the record was
		// made) are the same, whatever else a store could be handed.
		again := newRecord("r1", 0)
		again.Status, again.Usage.TotalTokens, again.Latency = 500, 1, time.Hour
		again.Executions = append(again.Executions, sluice.Execution{EdgeID: "extra", Started: at(6)})
		record(t, u, again)
		wantList(t, u, time.Time{}, 0, want)
	})

	t.Run("DuplicatesInOneBatchKeepTheFirst", func(t *testing.T) {
		u := open(t)
		a, b := newRecord("a", 0), newRecord("b", 1)
		a2 := newRecord("a", 2)
		a2.Alias = "other"
		if err := u.RecordUsage(t.Context(), []sluice.UsageRecord{a, b, a2, b}); err != nil {
			t.Fatalf("RecordUsage = %v", err)
		}
		wantList(t, u, time.Time{}, 0, a, b)
	})

	t.Run("EmptyBatchIsNoOp", func(t *testing.T) {
		u := open(t)
		record(t, u)
		wantList(t, u, time.Time{}, 0)
	})

	t.Run("ListsSinceOldestFirstUpToLimit", func(t *testing.T) {
		u := open(t)
		var recs []sluice.UsageRecord
		for i := range 5 {
			recs = append(recs, newRecord(fmt.Sprintf("r%d", i), i))
		}
		// Same start as r2: ties are broken by RequestID.
		tie := newRecord("r2-tie", 2)
		shuffled := append([]sluice.UsageRecord{tie}, recs...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		record(t, u, shuffled...)

		tests := []struct {
			name  string
			since time.Time
			limit int
			want  []sluice.UsageRecord
		}{
			{"All", time.Time{}, 0, []sluice.UsageRecord{recs[0], recs[1], recs[2], tie, recs[3], recs[4]}},
			{"NegativeLimitIsNoLimit", time.Time{}, -1, []sluice.UsageRecord{recs[0], recs[1], recs[2], tie, recs[3], recs[4]}},
			{"SinceIsInclusive", at(2), 0, []sluice.UsageRecord{recs[2], tie, recs[3], recs[4]}},
			{"SinceBetween", at(2).Add(time.Millisecond), 0, []sluice.UsageRecord{recs[3], recs[4]}},
			{"Limit", at(1), 2, []sluice.UsageRecord{recs[1], recs[2]}},
			{"LimitAboveCount", at(3), 10, []sluice.UsageRecord{recs[3], recs[4]}},
			{"SinceAfterAll", at(60), 0, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantList(t, u, tt.since, tt.limit, tt.want...)
			})
		}
	})

	t.Run("CallerCannotMutateStoredRecords", func(t *testing.T) {
		u := open(t)
		rec := newRecord("r1", 0)
		record(t, u, rec)
		rec.Executions[0].EdgeID = "mutated after record"
		rec.Executions[0].Expected[0] = "mutated after record"
		rec.Billing.Account = "mutated after record"
		got := list(t, u, time.Time{}, 0)
		got[0].Executions[1].EdgeID = "mutated after list"
		got[0].Executions[1].Expected[0] = "mutated after list"
		got[0].Billing.Price = 1
		wantList(t, u, time.Time{}, 0, newRecord("r1", 0))
	})

	t.Run("CountsExecutionsByPolicy", func(t *testing.T) {
		u := open(t)
		exec := func(account, credential string, expected []string, fallback string) sluice.Execution {
			return sluice.Execution{AccountID: account, CredentialID: credential, Expected: expected, Fallback: fallback, Started: at(0)}
		}
		rec := func(id, key string, minute int, execs ...sluice.Execution) sluice.UsageRecord {
			return sluice.UsageRecord{RequestID: id, KeyID: key, Started: at(minute), Executions: execs}
		}
		org1 := []string{"org-1"}
		record(t, u,
			rec("r0", "strict", 0, exec("org-1", "cred-1", org1, "")),
			rec("r1", "strict", 1, exec("org-1", "cred-1", org1, ""), exec("org-1", "cred-2", org1, "")),
			rec("r2", "preferred", 2, exec("org-2", "cred-2", org1, "cooling")),
			rec("r3", "preferred", 3, exec("org-2", "cred-2", org1, "cooling"), exec("org-3", "cred-3", org1, "no_room")),
			rec("r4", "any", 4, exec("org-1", "cred-1", nil, "")),
			rec("r5", "any", 5), // refused before any execution: counts nothing
		)
		count := func(key, account, credential string, expected []string, fallback string, n int64) ledger.PolicyCount {
			return ledger.PolicyCount{KeyID: key, AccountID: account, CredentialID: credential, Expected: expected, Fallback: fallback, Executions: n}
		}
		tests := []struct {
			name string
			give ledger.PolicyFilter
			want []ledger.PolicyCount
		}{
			{"All", ledger.PolicyFilter{}, []ledger.PolicyCount{
				count("any", "org-1", "cred-1", nil, "", 1),
				count("preferred", "org-2", "cred-2", org1, "cooling", 2),
				count("preferred", "org-3", "cred-3", org1, "no_room", 1),
				count("strict", "org-1", "cred-1", org1, "", 2),
				count("strict", "org-1", "cred-2", org1, "", 1),
			}},
			{"OneKey", ledger.PolicyFilter{KeyID: "preferred"}, []ledger.PolicyCount{
				count("preferred", "org-2", "cred-2", org1, "cooling", 2),
				count("preferred", "org-3", "cred-3", org1, "no_room", 1),
			}},
			{"FromInclusiveToExclusive", ledger.PolicyFilter{From: at(1), To: at(3)}, []ledger.PolicyCount{
				count("preferred", "org-2", "cred-2", org1, "cooling", 1),
				count("strict", "org-1", "cred-1", org1, "", 1),
				count("strict", "org-1", "cred-2", org1, "", 1),
			}},
			{"OpenEndedFrom", ledger.PolicyFilter{KeyID: "strict", From: at(1)}, []ledger.PolicyCount{
				count("strict", "org-1", "cred-1", org1, "", 1),
				count("strict", "org-1", "cred-2", org1, "", 1),
			}},
			{"UnknownKey", ledger.PolicyFilter{KeyID: "nobody"}, nil},
			{"EmptyRange", ledger.PolicyFilter{From: at(3), To: at(3)}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := u.CountExecutions(t.Context(), tt.give)
				if err != nil {
					t.Fatalf("CountExecutions(%+v) = %v", tt.give, err)
				}
				if diff := cmp.Diff(tt.want, got, opts); diff != "" {
					t.Errorf("CountExecutions(%+v) mismatch (-want +got):\n%s", tt.give, diff)
				}
			})
		}
	})

	t.Run("CacheReport", func(t *testing.T) { runCache(t, open) })
	t.Run("UpstreamReport", func(t *testing.T) { runUpstream(t, open) })
	t.Run("Filters", func(t *testing.T) { runFilters(t, open) })
	t.Run("Summary", func(t *testing.T) { runSummary(t, open) })
	t.Run("Rollup", func(t *testing.T) { runRollup(t, open) })

	t.Run("ConcurrentWritesAreSafe", func(t *testing.T) {
		u := open(t)
		const writers, each = 8, 10
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					own := newRecord(fmt.Sprintf("w%d-%02d", w, i), w)
					// Every writer also races to write "shared", each with
					// its own executions: exactly one version must win whole.
					shared := newRecord("shared", 0)
					shared.Executions = shared.Executions[:1+w%len(shared.Executions)]
					for j := range shared.Executions {
						shared.Executions[j].EdgeID = fmt.Sprintf("edge of writer %d", w)
					}
					if err := u.RecordUsage(t.Context(), []sluice.UsageRecord{own, shared}); err != nil {
						t.Errorf("concurrent RecordUsage = %v", err)
					}
				}
			})
		}
		wg.Wait()
		got := list(t, u, time.Time{}, 0)
		if len(got) != writers*each+1 {
			t.Fatalf("ListUsage after concurrent writes has %d records, want %d", len(got), writers*each+1)
		}
		for _, r := range got {
			if r.RequestID != "shared" {
				continue
			}
			for _, e := range r.Executions {
				if e.EdgeID != r.Executions[0].EdgeID {
					t.Errorf("shared record mixes executions of two writes: %q and %q", r.Executions[0].EdgeID, e.EdgeID)
				}
			}
		}
	})
}

// opts compare records as stored: instants, not locations, and nil or empty
// slices alike; a price by what it says (not the version id a table
// keeps in it).
var opts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreUnexported(billing.Price{}),
}

// at is a time with millisecond precision in a zone other than UTC.
func at(minute int) time.Time {
	return time.Date(2025, 3, 14, 15, minute, 26, 535_000_000, time.FixedZone("CET", 3600))
}

// newRecord returns a record with every field set, started at minute, with
// three executions (a rate limit, an endpoint failure, success on a
// fallback account). Durations are whole milliseconds.
func newRecord(id string, minute int) sluice.UsageRecord {
	start := at(minute)
	exec := func(i int, status sluice.ExecutionStatus, http int, errText string, u sluice.Usage) sluice.Execution {
		e := sluice.Execution{
			EdgeID:       fmt.Sprintf("cred-%d/openai-main/gpt-4o-mini", i),
			CredentialID: fmt.Sprintf("cred-%d", i),
			AccountID:    fmt.Sprintf("org-%d", i),
			EndpointID:   "openai-main",
			Model:        "gpt-4o-mini",
			Status:       status,
			HTTPStatus:   http,
			Error:        errText,
			Started:      start.Add(time.Duration(i) * 100 * time.Millisecond),
			FirstByte:    time.Duration(10+i) * time.Millisecond,
			Duration:     time.Duration(50+i) * time.Millisecond,
			Usage:        u,
			Expected:     []string{"org-0", "org-1"},
		}
		if i == 2 {
			e.Fallback = "failed:endpoint" // the preferred accounts failed; org-2 is outside them
			// and the credential is an end user's own key (BYOK)
			e.Owner = sluice.Owner{Tenant: "web", User: "user-7"}
		}
		return e
	}
	used := sluice.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 64, CacheWriteTokens: 16, ReasoningTokens: 8, TotalTokens: 150, Measured: true}
	return sluice.UsageRecord{
		RequestID: id,
		KeyID:     "web-app",
		Tenant:    "web",
		Alias:     "fast",
		Protocol:  sluice.ProtocolOpenAIChat,
		Stream:    true,
		Status:    200,
		Code:      sluice.CodeCapacityWaitTimeout,
		Started:   start,
		Latency:   1250 * time.Millisecond,
		TTFT:      320 * time.Millisecond,
		Usage:     used,
		EndUser:   "user-7",
		TaskType:  "section_generation",
		Profile:   "paid",
		Pool:      "paid",
		Priority:  "interactive",
		Affinity:  sluice.PlacementMoved,
		CacheHit:  true,
		Billing: &sluice.Charge{Account: "acme", Plan: "standard", PriceVersion: "standard/fast@2025-01-01T00:00:00Z",
			CostVersion: "gpt-4o-mini@2025-01-01T00:00:00Z", Price: 1234, Cost: 321},
		Executions: []sluice.Execution{
			exec(0, sluice.ExecutionRate, 429, "rate limited", sluice.Usage{}),
			exec(1, sluice.ExecutionEndpoint, 529, "overloaded", sluice.Usage{PromptTokens: 120, Measured: false}),
			exec(2, sluice.ExecutionOK, 200, "", used),
		},
	}
}

func record(t *testing.T, u ledger.Usage, recs ...sluice.UsageRecord) {
	t.Helper()
	if err := u.RecordUsage(t.Context(), recs); err != nil {
		t.Fatalf("RecordUsage = %v", err)
	}
}

func list(t *testing.T, u ledger.Usage, since time.Time, limit int) []sluice.UsageRecord {
	t.Helper()
	got, err := u.ListUsage(t.Context(), ledger.UsageFilter{Since: since, Limit: limit})
	if err != nil {
		t.Fatalf("ListUsage(%v, %d) = %v", since, limit, err)
	}
	return got
}

func wantList(t *testing.T, u ledger.Usage, since time.Time, limit int, want ...sluice.UsageRecord) {
	t.Helper()
	if diff := cmp.Diff(want, list(t, u, since, limit), opts); diff != "" {
		t.Errorf("ListUsage(%v, %d) mismatch (-want +got):\n%s", since, limit, diff)
	}
}
