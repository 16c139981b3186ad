package main

// What the driver reads of the gateway and its Redis while and after the
// load runs: the gauges, the balance, the affinity metrics and the log.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/billing"
)

// take reads every gauge once.
func take(ctx context.Context, gw *gateway, rdb *redis.Client) (sample, error) {
	sm := sample{at: time.Now(), values: map[string]float64{}}
	p, err := procStatus(gw.cmd.Process.Pid, gw.db)
	if err != nil {
		return sm, err
	}
	if sm.maps, err = readSmaps(gw.cmd.Process.Pid, gw.db); err != nil {
		return sm, err
	}
	m, err := gw.metrics(ctx, append([]string{"go_goroutines"}, goMemstats...)...)
	if err != nil {
		return sm, err
	}
	if err := redisMemory(ctx, rdb, sm.values); err != nil {
		return sm, err
	}
	if sm.redisKeys, err = keyGroups(ctx, rdb, gw.prefix); err != nil {
		return sm, err
	}
	sm.values["gateway RSS"], sm.values["gateway open files"], sm.values["gateway open files, not sockets"] = p.rss, p.fds, p.files
	sm.values[sqliteConnections] = p.dbOpenings
	addRegions(sm.values, sm.maps)
	sm.values["gateway goroutines"] = m["go_goroutines"]
	addGoView(sm.values, m)
	return sm, nil
}

// billedAccount is the billing account the key pays from.
const billedAccount = "paying"

// fund tops the account up and waits (10 s at most) until the gateway
// admits a request: its balance view reads the store every
// second. It returns the balance the load starts from.
func fund(ctx context.Context, gw *gateway, l *load) (billing.Micros, error) {
	if _, err := gw.adminDo(ctx, l.secrets, http.MethodPost, "/admin/billing/accounts/"+billedAccount+"/topup", `{"amount":"`+topUp+`"}`); err != nil {
		return 0, fmt.Errorf("top-up: %w", err)
	}
	var err error
	for range 100 {
		if _, err = l.exchange(ctx, chatCall(l.secrets.key, "chat", false, nil, oneTurn)); err == nil {
			return balance(ctx, gw, l.secrets)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("the key is still refused 10s after its top-up: %w", err)
}

func balance(ctx context.Context, gw *gateway, s secrets) (billing.Micros, error) {
	b, err := gw.adminDo(ctx, s, http.MethodGet, "/admin/billing/accounts/"+billedAccount, "")
	if err != nil {
		return 0, err
	}
	var a struct {
		Balance billing.Micros `json:"balance"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, fmt.Errorf("billing account %s: %w", b, err)
	}
	return a.Balance, nil
}

// billingCheck reports what the key spent; it must have spent.
func billingCheck(ctx context.Context, gw *gateway, s secrets, before billing.Micros, w io.Writer) error {
	after, err := balance(ctx, gw, s)
	if err != nil {
		return err
	}
	if after >= before {
		return fmt.Errorf("billing: the balance went from %v to %v: the requests were not charged", before, after)
	}
	fmt.Fprintf(w, "- Billing: account %s went from %v to %v (%v charged).\n", billedAccount, before, after, before-after)
	return nil
}

// affinityCheck reports the affinity alias's placements; conversations must
// have stayed on their accounts.
func affinityCheck(ctx context.Context, gw *gateway, w io.Writer) error {
	const base = `sluice_affinity_placements_total{alias="sticky",outcome="%s"}`
	hit, moved, fresh := fmt.Sprintf(base, "hit"), fmt.Sprintf(base, "moved"), fmt.Sprintf(base, "new")
	m, err := gw.metrics(ctx, hit, moved, fresh)
	if err != nil {
		return err
	}
	if m[hit] == 0 {
		return fmt.Errorf("affinity: no placement on a bound account (metrics %v)", m)
	}
	fmt.Fprintf(w, "- Affinity (alias sticky, %d conversations at a time, %d turns each): %.0f hits, %.0f new, %.0f moved; hit rate hit / (hit + moved) = %.3f.\n",
		sessionCount, turnsPerSession, m[hit], m[fresh], m[moved], m[hit]/(m[hit]+m[moved]))
	return nil
}

// logCheck counts the gateway's log lines above info by level and message.
func logCheck(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	lines := 0
	for line := range strings.Lines(string(b)) {
		lines++
		var e struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &e) != nil {
			counts["(not JSON) "+strings.TrimSpace(line)[:min(len(strings.TrimSpace(line)), 100)]]++
			continue
		}
		if e.Level == "WARN" || e.Level == "ERROR" {
			counts[e.Level+" "+e.Msg]++
		}
	}
	if len(counts) == 0 {
		fmt.Fprintf(w, "- Gateway log: %d lines, no warnings or errors.\n", lines)
		return nil
	}
	fmt.Fprintf(w, "- Gateway log: %d lines; above info:\n", lines)
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "  - %d × %s\n", counts[k], k)
	}
	return nil // warnings are reported, not fatal: the errors table judges the run
}

// sampler reads the gauges every `every` while the load runs, and logs a
// line a minute. Its fields are read after run returns.
type sampler struct {
	gw       *gateway
	rdb      *redis.Client
	load     *load
	every    time.Duration
	progress *log.Logger
	begin    time.Time

	samples []sample
	err     error // the read that failed and ended the load
}

// run samples until ctx ends; a failed read means the gateway is gone or
// broken, so it ends the load with cancel.
func (s *sampler) run(ctx context.Context, cancel context.CancelFunc) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	perMinute := max(1, int(time.Minute/s.every))
	for {
		sm, err := take(ctx, s.gw, s.rdb)
		switch {
		case err != nil && ctx.Err() == nil:
			s.err = err
			cancel()
			return
		case err == nil:
			s.samples = append(s.samples, sm)
			if len(s.samples)%perMinute == 0 {
				s.progress.Printf("%v: %d exchanges, RSS %.1f MiB, %v goroutines, %v files, Redis %.2f MiB",
					time.Since(s.begin).Round(time.Second), s.load.exchanges(), sm.values["gateway RSS"]/(1<<20),
					sm.values["gateway goroutines"], sm.values["gateway open files"], sm.values["Redis used_memory"]/(1<<20))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
