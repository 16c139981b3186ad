package ledgertest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Store is what a ledger store implements: usage records and the money.
type Store interface {
	ledger.Usage
	ledger.Billing
}

// RunBilling checks the behaviour every ledger.Billing must have, and how
// RecordUsage charges. open returns two handles on one new, empty store:
// for a database, two connections as two processes would open them; in
// memory, the same store twice.
func RunBilling(t *testing.T, open func(t *testing.T) (Store, Store)) {
	t.Run("ReplayedSettlementChargesOnce", func(t *testing.T) {
		s, other := open(t)
		r := charged("r1", "acme", day1.Add(time.Hour), 1500)
		record(t, s, r)
		record(t, s, r, r)  // the spool replays it, twice in one batch
		record(t, other, r) // and another process does too
		again := r          // a replay can never change what was charged
		again.Billing = &sluice.Charge{Account: "acme", Price: 99999}
		record(t, s, again)
		wantEntries(t, s, "acme", ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: r.Started})
		wantBalance(t, s, "acme", -1500)
	})

	t.Run("ChargesAreNotPosted", func(t *testing.T) {
		s, _ := open(t)
		apart := ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -900, At: day1}
		if applied, err := s.Post(t.Context(), apart); err == nil || applied {
			t.Fatalf("Post(%+v) = %v, %v; want an error: a charge comes with its usage record", apart, applied, err)
		}
		record(t, s, charged("r1", "acme", day1, 1500))
		wantEntries(t, s, "acme", ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: day1})
		wantBalance(t, s, "acme", -1500)
	})

	t.Run("ChargesOnlyMeasuredPricedAccountedRecords", func(t *testing.T) {
		s, _ := open(t)
		unmeasured := charged("unmeasured", "acme", day1, 0)
		unmeasured.Billing.Unmeasured = true
		free := charged("free", "acme", day1, 0)
		free.Billing.Cost = 40 // the platform paid; the customer is not charged
		costOnly := charged("cost-only", "", day1, 0)
		costOnly.Billing.Cost = 60
		unbilled := charged("unbilled", "acme", day1, 0)
		unbilled.Billing = nil
		record(t, s, unmeasured, free, costOnly, unbilled, charged("paid", "acme", day1, 700))
		wantEntries(t, s, "acme", ledger.Entry{Account: "acme", RequestID: "paid", Kind: ledger.EntryCharge, Amount: -700, At: day1})
		wantBalance(t, s, "acme", -700)
		wantSpend(t, s, ledger.SpendFilter{By: []ledger.Dimension{ledger.ByAccount}},
			ledger.SpendRow{Requests: 1, Tokens: 15, Cost: 60},
			ledger.SpendRow{Account: "acme", Requests: 3, Unmeasured: 1, Tokens: 45, Price: 700, Cost: 40})
	})

	t.Run("EntriesSumToTheBalance", func(t *testing.T) {
		s, other := open(t)
		post(t, s, topUp("acme", "top-1", day1, 10*billing.Unit))
		record(t, s, charged("r1", "acme", day1.Add(time.Minute), 2_500_000), charged("r2", "acme", day1.Add(2*time.Minute), 1_000_000),
			charged("r3", "globex", day1.Add(3*time.Minute), 400_000))
		post(t, other, ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryRefund, Amount: 2_500_000, Reason: "upstream outage",
			Admin: "ops", At: day1.Add(time.Hour)})
		post(t, s, ledger.Entry{Account: "globex", RequestID: "adj-1", Kind: ledger.EntryAdjustment, Amount: -100_000, Reason: "manual",
			Admin: "ops", At: day1.Add(time.Hour)})
		want := map[string]billing.Micros{"acme": 10*billing.Unit - 1_000_000, "globex": -500_000}
		bal, err := s.Balances(t.Context(), day1)
		if err != nil {
			t.Fatal(err)
		}
		for account, amount := range want {
			if got := bal.Accounts[account].Balance; got != amount {
				t.Errorf("Balances[%s] = %s, want %s", account, got, amount)
			}
			if sum := sumEntries(t, s, account); sum != amount {
				t.Errorf("entries of %s sum to %s, Balances says %s", account, sum, bal.Accounts[account].Balance)
			}
		}
	})

	t.Run("ConcurrentSettlementsAreSerialised", func(t *testing.T) {
		s, other := open(t)
		const writers, each, price = 8, 25, 1000
		post(t, s, topUp("acme", "top-0", day1, 50_000))
		var wg sync.WaitGroup
		for w := range writers {
			handle := []Store{s, other}[w%2] // two processes on PostgreSQL and SQLite
			wg.Go(func() {
				for i := range each {
					own := charged(fmt.Sprintf("w%d-%02d", w, i), "acme", day1.Add(time.Duration(i)*time.Second), price)
					// Every writer also settles the same shared requests, as two
					// replicas replaying one spool would.
					shared := charged(fmt.Sprintf("shared-%02d", i), "acme", day1, price)
					if err := handle.RecordUsage(t.Context(), []sluice.UsageRecord{own, shared}); err != nil {
						t.Errorf("RecordUsage = %v", err)
					}
					if _, err := handle.Post(t.Context(), topUp("acme", fmt.Sprintf("top-%d", i%5), day1, 100)); err != nil {
						t.Errorf("Post = %v", err)
					}
				}
			})
		}
		wg.Wait()
		want := billing.Micros(50_000 + 4*100 - (writers*each+each)*price) // top-1 … top-4 once each; top-0 is the first
		wantBalance(t, s, "acme", want)
		wantBalance(t, other, "acme", want)
		if n := len(statement(t, s, "acme", time.Time{}, time.Time{}, 0)); n != writers*each+each+5 {
			t.Errorf("statement has %d entries, want %d", n, writers*each+each+5)
		}
	})

	t.Run("PostIsIdempotentByRequestAndKind", func(t *testing.T) {
		s, other := open(t)
		first := topUp("acme", "idem-1", day1, 5000)
		if applied, err := s.Post(t.Context(), first); err != nil || !applied {
			t.Fatalf("first Post = %v, %v; want applied", applied, err)
		}
		again := first
		again.Amount = 7000
		for _, h := range []Store{s, other} {
			if applied, err := h.Post(t.Context(), again); err != nil || applied {
				t.Errorf("Post of a taken (request, kind) = %v, %v; want not applied, no error", applied, err)
			}
		}
		refund := ledger.Entry{Account: "acme", RequestID: "idem-1", Kind: ledger.EntryRefund, Amount: 10, Reason: "same id, other kind",
			Admin: "ops", At: day1.Add(time.Second)}
		if applied, err := s.Post(t.Context(), refund); err != nil || !applied {
			t.Errorf("Post of another kind of the same request = %v, %v; want applied", applied, err)
		}
		wantEntries(t, s, "acme", first, refund)
		wantBalance(t, s, "acme", 5010)
	})

	t.Run("AnIdempotencyKeyNamesOneChange", func(t *testing.T) {
		s, other := open(t)
		top := topUp("acme", "key-1", day1, 5000)
		post(t, s, top)
		adjust := ledger.Entry{Account: "acme", RequestID: "key-1", Kind: ledger.EntryAdjustment, Amount: 5000, Reason: "the same key again",
			Admin: "ops", At: day1.Add(time.Second)}
		for _, h := range []Store{s, other} {
			if applied, err := h.Post(t.Context(), adjust); !errors.Is(err, ledger.ErrKeyReused) || applied {
				t.Errorf("Post of an adjustment named by a top-up's key = %v, %v; want ErrKeyReused", applied, err)
			}
		}
		adjust.RequestID = "key-2"
		post(t, other, adjust)
		top.RequestID = "key-2"
		if applied, err := s.Post(t.Context(), top); !errors.Is(err, ledger.ErrKeyReused) || applied {
			t.Errorf("Post of a top-up named by an adjustment's key = %v, %v; want ErrKeyReused", applied, err)
		}
		wantBalance(t, s, "acme", 10000)

		// Raced from two processes, one key makes one change.
		for i := range 10 {
			key := fmt.Sprintf("race-%d", i)
			var wg sync.WaitGroup
			var applied [2]bool
			for j, e := range []ledger.Entry{topUp("acme", key, day1, 100),
				{Account: "acme", RequestID: key, Kind: ledger.EntryAdjustment, Amount: 100, Reason: "race", At: day1}} {
				wg.Go(func() {
					var err error
					applied[j], err = []Store{s, other}[j].Post(t.Context(), e)
					if err != nil && !errors.Is(err, ledger.ErrKeyReused) {
						t.Errorf("Post(%s %s) = %v", e.Kind, key, err)
					}
				})
			}
			wg.Wait()
			if applied[0] == applied[1] {
				t.Errorf("key %s raced as a top-up and an adjustment: applied %v; want exactly one", key, applied)
			}
		}
		wantBalance(t, s, "acme", 11000)
	})

	t.Run("BalancesStayWithinTheBound", func(t *testing.T) {
		s, other := open(t)
		post(t, s, topUp("acme", "top-max", day1, billing.MaxAmount))
		for _, e := range []ledger.Entry{
			topUp("acme", "top-more", day1, 1),
			{Account: "acme", RequestID: "refund-more", Kind: ledger.EntryRefund, Amount: 1, Reason: "r", At: day1},
			{Account: "acme", RequestID: "adj-more", Kind: ledger.EntryAdjustment, Amount: 1, Reason: "r", At: day1},
		} {
			if applied, err := other.Post(t.Context(), e); !errors.Is(err, ledger.ErrBalanceBound) || applied {
				t.Errorf("Post(%s of %s) past +bound = %v, %v; want ErrBalanceBound", e.Kind, e.Amount, applied, err)
			}
		}
		for _, amount := range []billing.Micros{billing.MaxAmount + 1, math.MaxInt64} {
			if applied, err := s.Post(t.Context(), topUp("globex", "huge", day1, amount)); err == nil || applied {
				t.Errorf("Post of a top-up of %s = %v, %v; want an error: beyond the largest amount", amount, applied, err)
			}
		}
		wantBalance(t, s, "acme", billing.MaxAmount) // the refused entries left nothing
		// Towards 0 is always taken; past −bound is not.
		for _, e := range []ledger.Entry{
			{Account: "acme", RequestID: "adj-down-1", Kind: ledger.EntryAdjustment, Amount: -billing.MaxAmount, Reason: "r", At: day1},
			{Account: "acme", RequestID: "adj-down-2", Kind: ledger.EntryAdjustment, Amount: -billing.MaxAmount, Reason: "r", At: day1},
		} {
			post(t, s, e)
		}
		down := ledger.Entry{Account: "acme", RequestID: "adj-down-3", Kind: ledger.EntryAdjustment, Amount: -1, Reason: "r", At: day1}
		if applied, err := s.Post(t.Context(), down); !errors.Is(err, ledger.ErrBalanceBound) || applied {
			t.Errorf("Post of an adjustment past −bound = %v, %v; want ErrBalanceBound", applied, err)
		}
		// The key of a refused change is free: nothing was stored under it.
		down.Amount = 1
		post(t, s, down)
		// An allowance entry closes its cycle whatever the balance.
		post(t, s, topUp("globex", "top-max-globex", day1, billing.MaxAmount))
		if applied, err := s.Post(t.Context(), ledger.Entry{Account: "globex", RequestID: "allowance:globex", Kind: ledger.EntryAllowance,
			Amount: 25 * billing.Unit, At: day1}); err != nil || !applied {
			t.Errorf("Post of an allowance past +bound = %v, %v; want applied", applied, err)
		}
		wantBalance(t, s, "acme", 1-billing.MaxAmount)
		wantBalance(t, other, "globex", billing.MaxAmount+25*billing.Unit)
	})

	t.Run("ExtremeChargesAreHeldAtTheEndOfTheRange", func(t *testing.T) {
		// A charge is never refused (the request ran): the balance and the
		// spends are held at the end of the int64 range, and neither this
		// batch nor the next, nor any read, fails for it.
		s, other := open(t)
		record(t, s, charged("r1", "acme", day1, math.MaxInt64))
		record(t, other, charged("r2", "acme", day1, 1), charged("r3", "acme", day1, 1), charged("r4", "globex", day1, 700))
		wantBalance(t, s, "acme", math.MinInt64)
		wantBalance(t, other, "globex", -700)
		b, err := s.Balances(t.Context(), day1)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Accounts["acme"].Day.Price; got != math.MaxInt64 {
			t.Errorf("acme's spend today = %s, want it held at %s", got, billing.Micros(math.MaxInt64))
		}
		if got := b.Keys["web-app"].Day.Price; got != math.MaxInt64 {
			t.Errorf("web-app's spend today = %s, want it held at %s", got, billing.Micros(math.MaxInt64))
		}
		// The way back: a top-up towards 0 is taken.
		post(t, s, topUp("acme", "top-back", day1.Add(time.Hour), billing.MaxAmount))
	})

	t.Run("AllowanceEntryClosesACycleOnce", func(t *testing.T) {
		s, other := open(t)
		record(t, s, charged("r1", "acme", day1, 1500), charged("r2", "acme", day1.Add(time.Hour), 700))
		end := ledger.CycleEnd(ledger.CycleDay, ledger.CycleStart(ledger.CycleDay, day1))
		closing := ledger.Entry{Account: "acme", RequestID: ledger.AllowanceRequestID("acme", ledger.Day(day1)), Kind: ledger.EntryAllowance,
			Amount: 2000, At: end}
		var applied int
		for _, h := range []Store{s, other, s} { // every replica posts it
			ok, err := h.Post(t.Context(), closing)
			if err != nil {
				t.Fatalf("Post(%+v) = %v", closing, err)
			}
			if ok {
				applied++
			}
		}
		if applied != 1 {
			t.Errorf("the closing entry was applied %d times, want once", applied)
		}
		wantEntries(t, s, "acme",
			ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: day1},
			ledger.Entry{Account: "acme", RequestID: "r2", Kind: ledger.EntryCharge, Amount: -700, At: day1.Add(time.Hour)},
			closing)
		wantBalance(t, s, "acme", -200) // only the spend beyond the day's allowance
		if got, err := other.Entries(t.Context(), closing.RequestID); err != nil || len(got) != 1 || got[0].Kind != ledger.EntryAllowance {
			t.Errorf("Entries(%s) = %v, %v; want the closing entry", closing.RequestID, got, err)
		}
	})

	t.Run("EntriesOfARequest", func(t *testing.T) {
		s, other := open(t)
		record(t, s, charged("r1", "acme", day1, 1500))
		refund := ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryRefund, Amount: 1500, Reason: "bad answer",
			Admin: "ops", At: day1.Add(time.Hour)}
		post(t, s, refund)
		post(t, s, topUp("acme", "r2", day1, 10))
		charge := ledger.Entry{Account: "acme", RequestID: "r1", Kind: ledger.EntryCharge, Amount: -1500, At: day1}
		for _, h := range []Store{s, other} {
			got, err := h.Entries(t.Context(), "r1")
			if err != nil {
				t.Fatalf("Entries(r1) = %v", err)
			}
			if diff := cmp.Diff([]ledger.Entry{charge, refund}, got, opts); diff != "" {
				t.Errorf("Entries(r1) mismatch (-want +got):\n%s", diff)
			}
		}
		if got, err := s.Entries(t.Context(), "nothing"); err != nil || len(got) != 0 {
			t.Errorf("Entries(nothing) = %v, %v; want none", got, err)
		}
	})

	t.Run("PostRefusesInvalidEntries", func(t *testing.T) {
		s, _ := open(t)
		for name, e := range map[string]ledger.Entry{
			"NegativeTopUp":         {Account: "acme", RequestID: "b", Kind: ledger.EntryTopUp, Amount: -5, At: day1},
			"ZeroAdjustment":        {Account: "acme", RequestID: "c", Kind: ledger.EntryAdjustment, Reason: "r", At: day1},
			"RefundWithoutReason":   {Account: "acme", RequestID: "d", Kind: ledger.EntryRefund, Amount: 5, At: day1},
			"UnknownKind":           {Account: "acme", RequestID: "e", Kind: "gift", Amount: 5, At: day1},
			"NoAccount":             {RequestID: "f", Kind: ledger.EntryTopUp, Amount: 5, At: day1},
			"NoRequestID":           {Account: "acme", Kind: ledger.EntryTopUp, Amount: 5, At: day1},
			"NoTime":                {Account: "acme", RequestID: "g", Kind: ledger.EntryTopUp, Amount: 5},
			"AdjustmentNoReasonNeg": {Account: "acme", RequestID: "h", Kind: ledger.EntryAdjustment, Amount: -5, At: day1},
			"NegativeAllowance":     {Account: "acme", RequestID: "i", Kind: ledger.EntryAllowance, Amount: -5, At: day1},
		} {
			if applied, err := s.Post(t.Context(), e); err == nil || applied {
				t.Errorf("%s: Post(%+v) = %v, %v; want an error", name, e, applied, err)
			}
		}
		wantEntries(t, s, "acme")
	})

	t.Run("StatementsAreOrderedAndWindowed", func(t *testing.T) {
		s, _ := open(t)
		var all []ledger.Entry
		for i := range 6 {
			e := topUp("acme", fmt.Sprintf("t%d", i), day1.Add(time.Duration(i/2)*time.Hour), billing.Micros(i+1)) // pairs share a time
			all = append(all, e)
		}
		all = append(all, ledger.Entry{Account: "acme", RequestID: "t1", Kind: ledger.EntryRefund, Amount: 1, Reason: "fix",
			Admin: "ops", At: all[1].At}) // same time and request as t1: ordered by kind
		shuffled := append([]ledger.Entry(nil), all...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for _, e := range shuffled {
			post(t, s, e)
		}
		post(t, s, topUp("globex", "other-account", day1, 1))
		// Charges, which are their records, among the posted entries: one
		// of the request and time of a top-up (ordered by kind), one alone.
		record(t, s, charged("t2", "acme", all[2].At, 7), charged("c9", "acme", day1.Add(90*time.Minute), 8),
			charged("c8", "globex", day1, 9))
		sameRequest := ledger.Entry{Account: "acme", RequestID: "t2", Kind: ledger.EntryCharge, Amount: -7, At: all[2].At}
		alone := ledger.Entry{Account: "acme", RequestID: "c9", Kind: ledger.EntryCharge, Amount: -8, At: day1.Add(90 * time.Minute)}
		ordered := []ledger.Entry{all[0], all[6], all[1], sameRequest, all[2], all[3], alone, all[4], all[5]}
		tests := []struct {
			name     string
			from, to time.Time
			limit    int
			want     []ledger.Entry
		}{
			{"All", time.Time{}, time.Time{}, 0, ordered},
			{"FromInclusive", day1.Add(time.Hour), time.Time{}, 0, ordered[3:]},
			{"ToExclusive", time.Time{}, day1.Add(2 * time.Hour), 0, ordered[:7]},
			{"Limit", day1, time.Time{}, 2, ordered[:2]},
			{"LimitAcrossChargesAndPosted", day1, time.Time{}, 5, ordered[:5]},
			{"WindowAndLimit", day1.Add(time.Hour), day1.Add(2 * time.Hour), 2, ordered[3:5]},
			{"Empty", day1.Add(3 * time.Hour), time.Time{}, 0, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if diff := cmp.Diff(tt.want, statement(t, s, "acme", tt.from, tt.to, tt.limit), opts); diff != "" {
					t.Errorf("Statement mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("SpendsByUTCDayAndMonth", func(t *testing.T) {
		s, _ := open(t)
		// In CET (UTC+1), 00:30 on the 15th is still the 14th in UTC.
		cet := time.FixedZone("CET", 3600)
		at := time.Date(2025, 3, 15, 12, 0, 0, 0, cet)
		rec := func(id string, started time.Time, price, cost int64) sluice.UsageRecord {
			r := charged(id, "acme", started, price)
			r.Billing.Cost = cost
			r.KeyID, r.Tenant, r.Pool, r.TaskType = "k1", "web", "paid", "chat"
			return r
		}
		record(t, s,
			rec("today", time.Date(2025, 3, 15, 1, 30, 0, 0, cet), 100, 10),           // 00:30 UTC on the 15th
			rec("yesterday-utc", time.Date(2025, 3, 15, 0, 30, 0, 0, cet), 200, 20),   // 23:30 UTC on the 14th
			rec("this-month", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), 400, 40),   // the month's first instant
			rec("last-month", time.Date(2025, 3, 1, 0, 59, 0, 0, cet), 800, 80),       // 23:59 UTC on 28 February
			rec("next-month", time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC), 1600, 160), // after at: not this month
		)
		got, err := s.Balances(t.Context(), at)
		if err != nil {
			t.Fatal(err)
		}
		spent := ledger.Spent{Day: ledger.Amounts{Price: 100, Cost: 10}, Month: ledger.Amounts{Price: 700, Cost: 70}}
		want := ledger.Balances{
			At:       at,
			Accounts: map[string]ledger.Balance{"acme": {Balance: -3100, Spent: spent}},
			Keys:     map[string]ledger.Spent{"k1": spent},
			Tenants:  map[string]ledger.Spent{"web": spent},
			Pools:    map[string]ledger.Spent{"paid": spent},
			Tasks:    map[string]ledger.Spent{"chat": spent},
		}
		if diff := cmp.Diff(want, got, opts); diff != "" {
			t.Errorf("Balances(%v) mismatch (-want +got):\n%s", at, diff)
		}
	})

	t.Run("SpendReports", func(t *testing.T) {
		s, _ := open(t)
		rec := func(id, account, key, user, alias, model string, started time.Time, price, cost int64) sluice.UsageRecord {
			r := charged(id, account, started, price)
			r.KeyID, r.EndUser, r.Alias = key, user, alias
			r.Billing.Cost = cost
			r.Executions = []sluice.Execution{{Model: "tried-first", Started: started}, {Model: model, Started: started}}
			return r
		}
		day2 := day1.AddDate(0, 0, 1)
		unmeasured := rec("u", "acme", "k1", "", "fast", "mini", day2, 0, 0)
		unmeasured.Billing.Unmeasured = true
		mobile := rec("d", "globex", "k3", "", "fast", "mini", day2, 700, 400)
		mobile.Tenant = "mobile"
		record(t, s,
			rec("a", "acme", "k1", "alice", "fast", "mini", day1.Add(time.Hour), 1000, 400),
			rec("b", "acme", "k2", "bob", "fast", "mini", day1.Add(2*time.Hour), 3000, 1000),
			rec("c", "acme", "k1", "alice", "smart", "big", day2, 5000, 4500),
			mobile,
			unmeasured,
		)
		row := func(account, key, user, alias, model string, day time.Time, requests, unmeasured int64, price, cost billing.Micros) ledger.SpendRow {
			return ledger.SpendRow{Account: account, KeyID: key, EndUser: user, Alias: alias, Model: model, Day: day,
				Requests: requests, Unmeasured: unmeasured, Tokens: 15 * requests, Price: price, Cost: cost} // charged's usage
		}
		tests := []struct {
			name string
			give ledger.SpendFilter
			want []ledger.SpendRow
		}{
			{"Everything", ledger.SpendFilter{}, []ledger.SpendRow{row("", "", "", "", "", time.Time{}, 5, 1, 9700, 6300)}},
			{"ByAccount", ledger.SpendFilter{By: []ledger.Dimension{ledger.ByAccount}}, []ledger.SpendRow{
				row("acme", "", "", "", "", time.Time{}, 4, 1, 9000, 5900),
				row("globex", "", "", "", "", time.Time{}, 1, 0, 700, 400),
			}},
			{"ByAliasAndModel", ledger.SpendFilter{By: []ledger.Dimension{ledger.ByModel, ledger.ByAlias}}, []ledger.SpendRow{
				row("", "", "", "fast", "mini", time.Time{}, 4, 1, 4700, 1800),
				row("", "", "", "smart", "big", time.Time{}, 1, 0, 5000, 4500),
			}},
			{"ByKeyAndEndUserOfOneAccount", ledger.SpendFilter{Account: "acme", By: []ledger.Dimension{ledger.ByKey, ledger.ByEndUser}}, []ledger.SpendRow{
				row("", "k1", "", "", "", time.Time{}, 1, 1, 0, 0),
				row("", "k1", "alice", "", "", time.Time{}, 2, 0, 6000, 4900),
				row("", "k2", "bob", "", "", time.Time{}, 1, 0, 3000, 1000),
			}},
			{"ByDayUTC", ledger.SpendFilter{By: []ledger.Dimension{ledger.ByDay}}, []ledger.SpendRow{
				row("", "", "", "", "", day1, 2, 0, 4000, 1400),
				row("", "", "", "", "", day2, 3, 1, 5700, 4900),
			}},
			{"OneKeyInARange", ledger.SpendFilter{KeyID: "k1", From: day1, To: day2, By: []ledger.Dimension{ledger.ByKey}}, []ledger.SpendRow{
				row("", "k1", "", "", "", time.Time{}, 1, 0, 1000, 400),
			}},
			{"ByTenant", ledger.SpendFilter{By: []ledger.Dimension{ledger.ByTenant}}, []ledger.SpendRow{
				withTenant("mobile", row("", "", "", "", "", time.Time{}, 1, 0, 700, 400)),
				withTenant("web", row("", "", "", "", "", time.Time{}, 4, 1, 9000, 5900)),
			}},
			{"OneTenantByAccount", ledger.SpendFilter{Tenant: "mobile", By: []ledger.Dimension{ledger.ByAccount}}, []ledger.SpendRow{
				row("globex", "", "", "", "", time.Time{}, 1, 0, 700, 400),
			}},
			{"NothingSelected", ledger.SpendFilter{Account: "nobody"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantSpend(t, s, tt.give, tt.want...)
			})
		}
		if margin := (&ledger.SpendRow{Price: 4700, Cost: 1800}).Margin(); margin != 2900 {
			t.Errorf("Margin = %s, want 2900", margin)
		}
		if _, err := s.Spend(t.Context(), ledger.SpendFilter{By: []ledger.Dimension{"color"}}); err == nil {
			t.Error("Spend by an unknown dimension = nil error")
		}
	})

	t.Run("SpendByEndUserTaskTypeAndDay", func(t *testing.T) {
		s, _ := open(t)
		day2 := day1.AddDate(0, 0, 1)
		rec := func(id, user, task, pool string, started time.Time, total, cached int64, price int64) sluice.UsageRecord {
			r := charged(id, "acme", started, price)
			r.EndUser, r.TaskType, r.Pool = user, task, pool
			r.Usage = sluice.Usage{PromptTokens: total - 10, CompletionTokens: 10, TotalTokens: total, CachedTokens: cached, Measured: true}
			r.Billing.Cost = price / 2
			return r
		}
		unmeasured := rec("u", "alice", "parse", "free", day1, 0, 0, 0)
		unmeasured.Usage = sluice.Usage{PromptTokens: 500, TotalTokens: 500} // an estimate: not counted
		unmeasured.Billing.Unmeasured = true
		record(t, s,
			rec("a", "alice", "parse", "free", day1.Add(time.Hour), 100, 40, 1000),
			rec("b", "alice", "parse", "free", day1.Add(2*time.Hour), 200, 0, 2000),
			rec("c", "alice", "generate", "paid", day1.Add(3*time.Hour), 1000, 600, 8000),
			rec("d", "alice", "parse", "free", day2, 50, 50, 500),
			rec("e", "bob", "parse", "paid", day2, 300, 100, 3000),
			unmeasured,
		)
		row := func(user, task, pool string, day time.Time, requests, unmeasured, tokens, cached int64, price billing.Micros) ledger.SpendRow {
			return ledger.SpendRow{EndUser: user, TaskType: task, Pool: pool, Day: day, Requests: requests, Unmeasured: unmeasured,
				Tokens: tokens, CachedTokens: cached, Price: price, Cost: price / 2}
		}
		wantSpend(t, s, ledger.SpendFilter{By: []ledger.Dimension{ledger.ByDay, ledger.ByTaskType, ledger.ByEndUser}},
			row("alice", "generate", "", day1, 1, 0, 1000, 600, 8000),
			row("alice", "parse", "", day1, 3, 1, 300, 40, 3000),
			row("alice", "parse", "", day2, 1, 0, 50, 50, 500),
			row("bob", "parse", "", day2, 1, 0, 300, 100, 3000))
		wantSpend(t, s, ledger.SpendFilter{By: []ledger.Dimension{ledger.ByPool}},
			row("", "", "free", time.Time{}, 4, 1, 350, 90, 3500),
			row("", "", "paid", time.Time{}, 2, 0, 1300, 700, 11000))
	})

	t.Run("EntriesBelongToAccountsNotKeys", func(t *testing.T) {
		s, _ := open(t)
		old := charged("before-rotation", "acme", day1, 300)
		old.KeyID = "k-old"
		post(t, s, topUp("acme", "top", day1, 1000))
		record(t, s, old)
		// The key is rotated (a new key bound to the account) and the old
		// one revoked: the account's history and balance carry on.
		rotated := charged("after-rotation", "acme", day1.Add(time.Hour), 200)
		rotated.KeyID = "k-new"
		record(t, s, rotated)
		wantBalance(t, s, "acme", 500)
		if n := len(statement(t, s, "acme", time.Time{}, time.Time{}, 0)); n != 3 {
			t.Errorf("statement has %d entries, want 3 (a top-up and both keys' charges)", n)
		}
		bal, err := s.Balances(t.Context(), day1)
		if err != nil {
			t.Fatal(err)
		}
		if bal.Keys["k-old"].Day.Price != 300 || bal.Keys["k-new"].Day.Price != 200 {
			t.Errorf("key spends = %+v, want k-old 300 and k-new 200 apart", bal.Keys)
		}
	})

	t.Run("AccountsAreStoredByID", func(t *testing.T) {
		s, other := open(t)
		acme := ledger.BillingAccount{ID: "acme", Plan: "standard", MaxInflight: 2, OnLimit: sluice.OnLimitRefuse, Overdraft: 5 * billing.Unit,
			Allowance: 25 * billing.Unit, Cycle: ledger.CycleMonth, Budgets: ledger.Budgets{Day: 10 * billing.Unit, Month: 200 * billing.Unit}}
		globex := ledger.BillingAccount{ID: "globex", Plan: "free"}
		post(t, s, topUp("acme", "top", day1, 1000))
		for _, a := range []ledger.BillingAccount{globex, {ID: "acme", Plan: "old"}, acme} {
			if err := s.PutBillingAccount(t.Context(), a); err != nil {
				t.Fatalf("PutBillingAccount(%+v) = %v", a, err)
			}
		}
		got, err := other.BillingAccounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.BillingAccount{acme, globex}, got); diff != "" {
			t.Errorf("BillingAccounts mismatch (-want +got):\n%s", diff)
		}
		wantBalance(t, s, "acme", 1000) // replacing the settings left the money alone
		for _, bad := range []ledger.BillingAccount{{Plan: "p"}, {ID: "x"}, {ID: "x", Plan: "p", OnLimit: "queue"},
			{ID: "x", Plan: "p", Allowance: 1}, {ID: "x", Plan: "p", Cycle: ledger.CycleDay}, {ID: "x", Plan: "p", MaxInflight: -1},
			{ID: "x", Plan: "p", Overdraft: -1}, {ID: "x", Plan: "p", Overdraft: billing.MaxAmount + 1},
			{ID: "x", Plan: "p", Allowance: billing.MaxAmount + 1, Cycle: ledger.CycleDay}, {ID: "x", Plan: "p", Budgets: ledger.Budgets{Month: billing.MaxAmount + 1}}} {
			if err := s.PutBillingAccount(t.Context(), bad); err == nil {
				t.Errorf("PutBillingAccount(%+v) = nil, want an error", bad)
			}
		}
	})

	t.Run("PricesAreVersionsStoredOnce", func(t *testing.T) {
		s, other := open(t)
		rates := billing.Rates{Input: 600_000, Output: 2_400_000, CacheRead: 150_000, CacheWrite: 600_000, Reasoning: 2_400_000,
			Request: 1, VideoSecond: 2, VideoItem: 3}
		v1 := billing.Price{Kind: billing.KindPrice, Plan: "standard", Alias: "fast", EffectiveFrom: day1.In(time.FixedZone("CET", 3600)), Rates: rates}
		v2 := v1
		v2.EffectiveFrom, v2.Rates.Input = day1.AddDate(0, 0, 7), 700_000
		cost := billing.Price{Kind: billing.KindCost, Model: "gpt-4o-mini", EffectiveFrom: day1, Rates: billing.Rates{Input: 150_000}}
		for _, p := range []billing.Price{v2, cost, v1, v1} {
			if err := s.PutPrice(t.Context(), p); err != nil {
				t.Fatalf("PutPrice(%s) = %v", p.Version(), err)
			}
		}
		changed := v1
		changed.Rates.Output = 1
		if err := other.PutPrice(t.Context(), changed); !errors.Is(err, ledger.ErrPriceConflict) {
			t.Errorf("PutPrice of a stored version with other rates = %v, want ErrPriceConflict", err)
		}
		if err := s.PutPrice(t.Context(), billing.Price{Kind: billing.KindPrice, Plan: "standard", EffectiveFrom: day1}); err == nil {
			t.Error("PutPrice of a price without alias = nil error")
		}
		got, err := other.Prices(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]billing.Price{cost, v1, v2}, got, opts); diff != "" {
			t.Errorf("Prices mismatch (-want +got):\n%s", diff)
		}
		tab, err := billing.NewTable(got)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := tab.Price("standard", "fast", day1.AddDate(0, 0, 1)); !ok || p.Version() != v1.Version() {
			t.Errorf("stored prices in a Table: Price = %s, %v; want %s", p.Version(), ok, v1.Version())
		}
	})
}

func withTenant(tenant string, r ledger.SpendRow) ledger.SpendRow {
	r.Tenant = tenant
	return r
}

// day1 is a UTC midnight.
var day1 = time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)

// charged is a record of one request charged price to account.
func charged(id, account string, started time.Time, price int64) sluice.UsageRecord {
	return sluice.UsageRecord{RequestID: id, KeyID: "web-app", Tenant: "web", Alias: "fast", Started: started, Status: 200,
		Usage:   sluice.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Measured: true},
		Billing: &sluice.Charge{Account: account, Plan: "standard", PriceVersion: "standard/fast@2025-01-01T00:00:00Z", Price: price}}
}

func topUp(account, id string, at time.Time, amount billing.Micros) ledger.Entry {
	return ledger.Entry{Account: account, RequestID: id, Kind: ledger.EntryTopUp, Amount: amount, Reason: "paid invoice", Admin: "ops", At: at}
}

func post(t *testing.T, s Store, e ledger.Entry) {
	t.Helper()
	if _, err := s.Post(t.Context(), e); err != nil {
		t.Fatalf("Post(%+v) = %v", e, err)
	}
}

func statement(t *testing.T, s Store, account string, from, to time.Time, limit int) []ledger.Entry {
	t.Helper()
	got, err := s.Statement(t.Context(), account, from, to, limit)
	if err != nil {
		t.Fatalf("Statement(%s) = %v", account, err)
	}
	return got
}

func wantEntries(t *testing.T, s Store, account string, want ...ledger.Entry) {
	t.Helper()
	if diff := cmp.Diff(want, statement(t, s, account, time.Time{}, time.Time{}, 0), opts); diff != "" {
		t.Errorf("Statement(%s) mismatch (-want +got):\n%s", account, diff)
	}
}

func sumEntries(t *testing.T, s Store, account string) billing.Micros {
	t.Helper()
	var sum billing.Micros
	for _, e := range statement(t, s, account, time.Time{}, time.Time{}, 0) {
		sum = sum.Add(e.Amount)
	}
	return sum
}

// wantBalance checks the account's balance, and that it is the sum of its
// entries.
func wantBalance(t *testing.T, s Store, account string, want billing.Micros) {
	t.Helper()
	b, err := s.Balances(t.Context(), day1)
	if err != nil {
		t.Fatalf("Balances = %v", err)
	}
	if got := b.Accounts[account].Balance; got != want {
		t.Errorf("balance of %s = %s, want %s", account, got, want)
	}
	if sum := sumEntries(t, s, account); sum != want {
		t.Errorf("entries of %s sum to %s, want %s", account, sum, want)
	}
}

func wantSpend(t *testing.T, s Store, f ledger.SpendFilter, want ...ledger.SpendRow) {
	t.Helper()
	got, err := s.Spend(t.Context(), f)
	if err != nil {
		t.Fatalf("Spend(%+v) = %v", f, err)
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Spend(%+v) mismatch (-want +got):\n%s", f, diff)
	}
}
