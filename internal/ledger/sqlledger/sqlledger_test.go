package sqlledger_test

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/sqldb/sqldbtest"
)

func TestContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ledgertest.Run(t, func(t *testing.T) ledger.Usage {
			return sqlledger.New(sqldbtest.Open(t, url(t)))
		})
	})
}

// TestBillingContract runs the billing suite with two handles on one
// database, each with its own connections and prepared statements: two
// processes sharing it.
func TestBillingContract(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		ledgertest.RunBilling(t, func(t *testing.T) (ledgertest.Store, ledgertest.Store) {
			u := url(t)
			return sqlledger.New(sqldbtest.Open(t, u)), sqlledger.New(sqldbtest.Open(t, u))
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
		s := sqlledger.New(db)
		db.Close()
		if err := s.RecordUsage(t.Context(), []sluice.UsageRecord{{RequestID: "r"}}); err == nil {
			t.Error("RecordUsage = nil, want an error")
		}
		if _, err := s.ListUsage(t.Context(), ledger.UsageFilter{}); err == nil {
			t.Error("ListUsage = nil error, want an error")
		}
	})
}

// TestBatchesOfEverySize checks batches that take several prepared
// statement shapes (rows are written in chunks of 64, 32, … 1), part of
// them stored before: every new record is written whole, once, and a
// record stored before keeps its first version and executions.
func TestBatchesOfEverySize(t *testing.T) {
	sqldbtest.Each(t, func(t *testing.T, url func(testing.TB) string) {
		s := sqlledger.New(sqldbtest.Open(t, url(t)))
		start := time.Date(2025, 3, 14, 15, 0, 0, 0, time.UTC)
		rec := func(i int, edge string) sluice.UsageRecord {
			r := sluice.UsageRecord{RequestID: fmt.Sprintf("r%03d", i), Started: start.Add(time.Duration(i) * time.Second), Status: 200}
			for seq := range i % 4 { // 0 to 3 executions
				r.Executions = append(r.Executions, sluice.Execution{EdgeID: edge, Model: fmt.Sprint(seq), Started: r.Started})
			}
			return r
		}
		var want, first, second []sluice.UsageRecord
		for i := range 40 {
			first = append(first, rec(i, "first"))
		}
		for i := range 167 {
			second = append(second, rec(i, "second"))
			want = append(want, rec(i, map[bool]string{true: "first", false: "second"}[i < 40]))
		}
		for _, batch := range [][]sluice.UsageRecord{first, second} {
			if err := s.RecordUsage(t.Context(), batch); err != nil {
				t.Fatalf("RecordUsage(%d records) = %v", len(batch), err)
			}
		}
		got, err := s.ListUsage(t.Context(), ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListUsage after batches of 40 and 167 (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkRecordUsage writes batches of 256 records of one execution each,
// the usage writer's batch, to an SQLite file; ns/op and allocs/op are per
// record, and so is cpu-ns/op, the process's CPU time (wall time tells
// little on a busy machine). A billed record is also its charge entry (an
// entry of the charges index) and adds to the running totals, in the same
// transaction: billed less unbilled is what billing costs the usage writer
// per request.
func BenchmarkRecordUsage(b *testing.B) {
	for _, billed := range []bool{false, true} {
		b.Run(map[bool]string{false: "unbilled", true: "billed"}[billed], func(b *testing.B) {
			s := sqlledger.New(sqldbtest.Open(b, "sqlite://"+b.TempDir()+"/sluice.db"))
			const batch = 256
			recs := make([]sluice.UsageRecord, batch)
			n := 0
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if n%batch == 0 && n > 0 {
					if err := s.RecordUsage(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
				}
				now := time.Now()
				recs[n%batch] = sluice.UsageRecord{
					RequestID: fmt.Sprintf("req_0a1b2c3d4e5f%s", strconv.FormatInt(int64(n), 36)), KeyID: "bench", Tenant: "bench", Alias: "bench",
					Protocol: sluice.ProtocolOpenAIChat, Status: 200, Started: now, Latency: 40 * time.Millisecond, TTFT: 30 * time.Millisecond,
					Usage: sluice.Usage{PromptTokens: 146, CompletionTokens: 100, TotalTokens: 246, Measured: true},
					Executions: []sluice.Execution{{
						EdgeID: "sim-1/sim/gpt-4o-mini", CredentialID: "sim-1", AccountID: "sim-1", EndpointID: "sim", Model: "gpt-4o-mini",
						Status: sluice.ExecutionOK, HTTPStatus: 200, Started: now, FirstByte: 30 * time.Millisecond, Duration: 39 * time.Millisecond,
						Usage: sluice.Usage{PromptTokens: 146, CompletionTokens: 100, TotalTokens: 246, Measured: true},
					}},
				}
				if billed {
					recs[n%batch].Billing = &sluice.Charge{Account: "bench", Plan: "standard", PriceVersion: "standard/bench@2020-01-01T00:00:00Z",
						CostVersion: "gpt-4o-mini@2020-01-01T00:00:00Z", Price: 427600, Cost: 81900}
				}
				n++
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
