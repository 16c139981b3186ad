package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
)

// usageCommand runs "sluice usage …".
func (c *cli) usageCommand(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing usage subcommand (list, summary, policy, cache)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return c.usageList(args)
	case "summary":
		return c.usageSummary(args)
	case "policy":
		return c.usagePolicy(args)
	case "cache":
		return c.usageCache(args)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown usage subcommand %q", sub)}
}

// usageFlags defines the flags of a usage filter's window and fields.
func usageFlags(cmd *command, q *ledger.UsageFilter) {
	timeFlag(cmd, &q.Since, "since", "records started at or after `TIME` (RFC 3339; default: a day before --until)")
	timeFlag(cmd, &q.Until, "until", "… and before `TIME` (RFC 3339; default: now)")
	for _, f := range []struct {
		name, help string
		value      *string
	}{
		{"tenant", "of this `TENANT`", &q.Tenant},
		{"key", "of this key `ID`", &q.KeyID},
		{"alias", "of this model `ALIAS`", &q.Alias},
		{"model", "served by this upstream `MODEL`", &q.Model},
		{"end-user", "of this `END_USER`", &q.EndUser},
		{"task-type", "of this `TASK_TYPE`", &q.TaskType},
		{"code", "that ended with this error `CODE` (ok: without one)", &q.Code},
	} {
		cmd.fs.StringVar(f.value, f.name, "", "only records "+f.help)
	}
}

// usageList runs "sluice usage list": one row per execution, the request's
// columns on its first; with --csv, the server's CSV, a row per record.
func (c *cli) usageList(args []string) error {
	cmd := c.command("usage list", "[--since RFC3339] [--until RFC3339] [--tenant T] [--key ID] [--alias A] [--model M] [--end-user U] [--task-type T] [--code C] [--limit N] [--csv]")
	var q ledger.UsageFilter
	usageFlags(cmd, &q)
	cmd.fs.IntVar(&q.Limit, "limit", 0, "at most `N` records (default 100, at most 10000)")
	asCSV := cmd.fs.Bool("csv", false, "print the records as CSV, as GET /admin/usage?format=csv answers")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	if *asCSV {
		return cl.UsageCSV(c.ctx, q, c.stdout)
	}
	recs, err := cl.Usage(c.ctx, q)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(recs)
	}
	t := newTable(c.stdout)
	t.row("REQUEST", "STARTED", "KEY", "ALIAS", "STATUS", "TOKENS", "ACCOUNT", "CREDENTIAL", "RESULT", "EXPECTED", "FALLBACK")
	for _, r := range recs {
		request := []string{r.RequestID, when(r.Started), r.KeyID, r.Alias, strconv.Itoa(r.Status), strconv.FormatInt(r.Usage.TotalTokens, 10)}
		if len(r.Executions) == 0 {
			t.row(append(request, "-", "-", orDash(string(r.Code)), "-", "-")...)
		}
		for i, e := range r.Executions {
			if i > 0 {
				request = make([]string, len(request))
			}
			result := string(e.Status)
			if e.HTTPStatus != 0 {
				result += " " + strconv.Itoa(e.HTTPStatus)
			}
			t.row(append(request, e.AccountID, e.CredentialID, result, list(e.Expected, "*"), orDash(e.Fallback))...)
		}
	}
	return t.flush()
}

// usageSummary runs "sluice usage summary": requests, errors, tokens,
// spend and latency per bucket of the window, and in all.
func (c *cli) usageSummary(args []string) error {
	cmd := c.command("usage summary", "[--bucket minute|hour|day] [--since RFC3339] [--until RFC3339] [filters as usage list]")
	var q ledger.UsageFilter
	usageFlags(cmd, &q)
	bucket := cmd.fs.String("bucket", "", "`minute`, hour or day (default: the narrowest giving at most 500 buckets)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	sum, err := cl.UsageSummary(c.ctx, q, ledger.Bucket(*bucket))
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(sum)
	}
	fmt.Fprintf(c.stdout, "Requests from %s to %s by %s\n\n", when(sum.Since), when(sum.Until), sum.Bucket)
	t := newTable(c.stdout)
	t.row("START", "REQUESTS", "ERRORS", "PROMPT", "COMPLETION", "CACHED", "SPEND "+sum.Currency, "P50 MS", "P95 MS", "P99 MS", "TTFT P50 MS")
	cells := func(start string, st admin.UsageStats) []string {
		var errs int64
		for _, n := range st.Errors {
			errs += n
		}
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
		return []string{start, strconv.FormatInt(st.Requests, 10), strconv.FormatInt(errs, 10), strconv.FormatInt(st.PromptTokens, 10),
			strconv.FormatInt(st.CompletionTokens, 10), strconv.FormatInt(st.CachedTokens, 10), st.Spend.String(),
			f(st.LatencyP50MS), f(st.LatencyP95MS), f(st.LatencyP99MS), f(st.TTFTP50MS)}
	}
	for _, b := range sum.Buckets {
		t.row(cells(when(*b.Start), b)...)
	}
	t.row(cells("(total)", sum.Total)...)
	if err := t.flush(); err != nil {
		return err
	}
	if sum.Percentiles == admin.PercentilesUpperBound {
		fmt.Fprintln(c.stdout, "\nClosed days were read from their daily roll-ups: each percentile is an upper bound, less than 9.1% above the exact value.")
	}
	if w := sum.QueueWaitThisReplicaSinceStart; w != nil {
		fmt.Fprintf(c.stdout, "\nQueue wait on this replica since it started (%d requests): p50 %.1f ms, p95 %.1f ms, p99 %.1f ms\n",
			w.Observed, w.P50MS, w.P95MS, w.P99MS)
	}
	return nil
}

// usagePolicy runs "sluice usage policy": per key, where its executions ran
// against the accounts its policy expected.
func (c *cli) usagePolicy(args []string) error {
	cmd := c.command("usage policy", "[KEY_ID] [--from RFC3339] [--to RFC3339]")
	var from, to time.Time
	timeFlag(cmd, &from, "from", "executions of requests started at or after `TIME` (RFC 3339; default: a day before --to)")
	timeFlag(cmd, &to, "to", "… and before `TIME` (RFC 3339; default: now)")
	pos, err := cmd.parse(args, 0, 1)
	if err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	var keyID string
	if len(pos) == 1 {
		keyID = pos[0]
	}
	rep, err := cl.PolicyReport(c.ctx, keyID, from, to)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	fmt.Fprintf(c.stdout, "Executions from %s to %s\n\n", when(rep.From), when(rep.To))
	if len(rep.Keys) == 0 {
		fmt.Fprintln(c.stdout, "none")
		return nil
	}
	t := newTable(c.stdout)
	t.row("KEY", "EXPECTED", "ACCOUNT", "CREDENTIAL", "EXECUTIONS", "ON EXPECTED", "FALLBACKS", "REASONS")
	for _, k := range rep.Keys {
		for _, a := range k.Accounts {
			t.row(append([]string{k.KeyID, list(k.Expected, "*"), a.AccountID, a.CredentialID}, tallyCells(&a.PolicyTally)...)...)
		}
		if len(k.Accounts) > 1 {
			t.row(append([]string{k.KeyID, list(k.Expected, "*"), "(all)", ""}, tallyCells(&k.PolicyTally)...)...)
		}
	}
	return t.flush()
}

// usageCache runs "sluice usage cache": prompt-cache tokens and the
// session-affinity hit rate by upstream account, alias and day.
func (c *cli) usageCache(args []string) error {
	cmd := c.command("usage cache", "[--from RFC3339] [--to RFC3339] [--by account,alias,day]")
	var q admin.CacheQuery
	timeFlag(cmd, &q.From, "from", "requests started at or after `TIME` (RFC 3339; default: a day before --to)")
	timeFlag(cmd, &q.To, "to", "… and before `TIME` (RFC 3339; default: now)")
	by := cmd.fs.String("by", "account,alias", "group by these `DIMENSIONS`: account (upstream), alias, day")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	for _, d := range admin.SplitList(*by) {
		q.By = append(q.By, ledger.Dimension(d))
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	rep, err := cl.CacheReport(c.ctx, q)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	fmt.Fprintf(c.stdout, "Requests from %s to %s\n\n", when(rep.From), when(rep.To))
	t := groupedTable(c.stdout, rep.By, "REQUESTS", "PROMPT", "CACHED", "CACHE WRITE", "CACHED SHARE", "HITS", "NEW", "MOVED", "HIT RATE")
	cells := func(r admin.CacheRow) []string {
		out := groupCells(rep.By, map[ledger.Dimension]string{ledger.ByAccount: r.AccountID, ledger.ByAlias: r.Alias, ledger.ByDay: r.Day})
		rate := "-"
		if r.Affinity.HitRate != nil {
			rate = percent(*r.Affinity.HitRate)
		}
		return append(out, strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.PromptTokens, 10), strconv.FormatInt(r.CachedTokens, 10),
			strconv.FormatInt(r.CacheWriteTokens, 10), percent(r.CachedShare), strconv.FormatInt(r.Affinity.Hits, 10),
			strconv.FormatInt(r.Affinity.New, 10), strconv.FormatInt(r.Affinity.Moved, 10), rate)
	}
	for _, r := range rep.Rows {
		t.row(cells(r)...)
	}
	if len(rep.Rows) > 1 && len(rep.By) > 0 {
		total := cells(rep.Total)
		total[0] = "(total)"
		t.row(total...)
	}
	return t.flush()
}

// groupedTable starts the table of a grouped report: a column for each
// dimension it is grouped by, then the measures.
func groupedTable(w io.Writer, by []ledger.Dimension, measures ...string) *table {
	head := make([]string, 0, len(by)+len(measures))
	for _, d := range by {
		head = append(head, strings.ToUpper(string(d)))
	}
	t := newTable(w)
	t.row(append(head, measures...)...)
	return t
}

// groupCells are a grouped report row's cells of the dimensions by, from
// the row's value of each ("-" when it has none).
func groupCells(by []ledger.Dimension, values map[ledger.Dimension]string) []string {
	out := make([]string, 0, len(by))
	for _, d := range by {
		out = append(out, orDash(values[d]))
	}
	return out
}

// percent is a share as a percentage with one decimal, "87.5%".
func percent(share float64) string { return strconv.FormatFloat(100*share, 'f', 1, 64) + "%" }

// tallyCells are a tally's table columns: executions, on expected,
// fallbacks and the fallbacks by reason, "cooling 2, no_room 1".
func tallyCells(t *admin.PolicyTally) []string {
	reasons := make([]string, 0, len(t.Reasons))
	for _, r := range slices.Sorted(maps.Keys(t.Reasons)) {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, t.Reasons[r]))
	}
	return []string{strconv.Itoa(t.Executions), strconv.Itoa(t.OnExpected), strconv.Itoa(t.Fallbacks), list(reasons, "-")}
}

// timeFlag defines an RFC 3339 time flag that sets *t.
func timeFlag(cmd *command, t *time.Time, name, help string) {
	cmd.fs.Func(name, help, func(v string) error {
		parsed, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not an RFC 3339 time", v)
		}
		*t = parsed
		return nil
	})
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
