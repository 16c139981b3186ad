package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// gauge is one quantity sampled for drift.
type gauge struct {
	name  string
	unit  string
	scale float64 // raw value / scale = value in unit
	// judged gauges decide the verdict (the four); the others are
	// shown to explain them.
	judged bool
}

var gauges = []gauge{
	{"gateway RSS", "MiB", 1 << 20, true},
	{"gateway open files", "", 1, true},
	{"gateway goroutines", "", 1, true},
	{"Redis used_memory", "MiB", 1 << 20, true},
	// One socket per caller connection: a keep-alive connection the
	// gateway closes after 2 minutes idle, so sockets follow the load's
	// recent peak; a leak of files (spool, database) shows here alone.
	{"gateway open files, not sockets", "", 1, false},
	// SQLite opens the database file once per connection, and each
	// connection has a page cache of its own (cache_size).
	{sqliteConnections, "", 1, false},
	// Where the RSS is (memory.go): its regions, which add up to it, and
	// Go's view of the memory it manages.
	{goArenas.gaugeName(), "MiB", 1 << 20, false},
	{otherAnon.gaugeName(), "MiB", 1 << 20, false},
	{binaryFile.gaugeName(), "MiB", 1 << 20, false},
	{dbFiles.gaugeName(), "MiB", 1 << 20, false},
	{otherFiles.gaugeName(), "MiB", 1 << 20, false},
	{goHeapInUse, "MiB", 1 << 20, false},
	{goHeapKept, "MiB", 1 << 20, false},
	{goStacks, "MiB", 1 << 20, false},
	{goMetadata, "MiB", 1 << 20, false},
	{"Redis keys", "", 1, false},
	// Where used_memory is (redismem.go): its parts add up to it.
	{redisDataset, "MiB", 1 << 20, false},
	{redisClients, "MiB", 1 << 20, false},
	{redisScripts, "MiB", 1 << 20, false},
	{redisOtherOverhead, "MiB", 1 << 20, false},
	{redisSlowlog, "", 1, false},
}

// sample is every gauge read at one moment, in raw units, by gauge name.
type sample struct {
	at     time.Time
	values map[string]float64
	maps   []mapping // the gateway's, for the mappings that grew
	// redisKeys are the gateway's keys in Redis by group (keyGroup).
	redisKeys map[string]keyGroupSize
}

// fit is the least-squares line through a gauge's samples after warm-up.
type fit struct {
	n                   int
	mean, first, last   float64
	slope, slopeStdErr  float64 // per hour
	slopePct, stdErrPct float64 // per hour, as a percentage of the mean
}

// leastSquares fits y = a + b·x. The standard error of b is 0 when the
// points lie on the line, and NaN with fewer than three points.
func leastSquares(x, y []float64) (b, stdErr float64) {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx == 0 {
		return math.NaN(), math.NaN()
	}
	b = sxy / sxx
	var ssr float64
	for i := range x {
		r := y[i] - (my + b*(x[i]-mx))
		ssr += r * r
	}
	if len(x) < 3 {
		return b, math.NaN()
	}
	return b, math.Sqrt(ssr / (n - 2) / sxx)
}

// fitGauge fits g's samples taken from `from` on, time in hours.
func fitGauge(g gauge, samples []sample, from time.Time) fit {
	var x, y []float64
	for _, s := range samples {
		if v, ok := s.values[g.name]; ok && !s.at.Before(from) {
			x = append(x, s.at.Sub(from).Hours())
			y = append(y, v/g.scale)
		}
	}
	f := fit{n: len(y), slope: math.NaN(), slopeStdErr: math.NaN(), slopePct: math.NaN(), stdErrPct: math.NaN()}
	if len(y) == 0 {
		return f
	}
	for _, v := range y {
		f.mean += v
	}
	f.mean /= float64(len(y))
	f.first, f.last = y[0], y[len(y)-1]
	if len(y) >= 2 {
		f.slope, f.slopeStdErr = leastSquares(x, y)
		f.slopePct, f.stdErrPct = 100*f.slope/f.mean, 100*f.slopeStdErr/f.mean
	}
	return f
}

// verdict judges a fit against threshold (percent of the mean per hour):
// flat when the slope is within it; drift when it is beyond it by more than
// two standard errors (the growth is real, not the noise of the samples);
// inconclusive otherwise — a longer run would tell.
func (f fit) verdict(threshold float64) string {
	switch {
	case math.IsNaN(f.slopePct):
		return "too few samples"
	case math.Abs(f.slopePct) <= threshold:
		return "flat"
	case math.Abs(f.slopePct)-2*f.stdErrPct > threshold:
		return "DRIFT"
	default:
		return "inconclusive"
	}
}

// percentile returns the p-th percentile (0–100) of sorted durations, by
// the nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// latencyCell is "p50 / p90 / p99" in milliseconds of the successful
// exchanges in os, "–" when there are none.
func latencyCell(os []outcome) string {
	var ds []time.Duration
	for _, o := range os {
		if o.err == nil {
			ds = append(ds, o.latency)
		}
	}
	if len(ds) == 0 {
		return "–"
	}
	slices.Sort(ds)
	return ms(percentile(ds, 50)) + " / " + ms(percentile(ds, 90)) + " / " + ms(percentile(ds, 99))
}

// windowTable writes the latency of every window of length w from begin
// to begin+d; the last window takes in what started after (a job's polls).
func windowTable(b *strings.Builder, outcomes []outcome, begin time.Time, d, w time.Duration) {
	fmt.Fprintf(b, "| window | exchanges | errors | all p50 / p90 / p99 ms |")
	for _, p := range protocols {
		fmt.Fprintf(b, " %s |", p)
	}
	b.WriteString("\n| --- | ---: | ---: | ---: |" + strings.Repeat(" ---: |", len(protocols)) + "\n")
	byWindow := map[int][]outcome{}
	last := max(0, int((d+w-1)/w)-1)
	for _, o := range outcomes {
		i := min(int(o.at.Sub(begin)/w), last)
		byWindow[i] = append(byWindow[i], o)
	}
	for i := 0; i <= last; i++ {
		os := byWindow[i]
		errs := 0
		for _, o := range os {
			if o.err != nil {
				errs++
			}
		}
		fmt.Fprintf(b, "| %s–%s | %d | %d | %s |", short(time.Duration(i)*w), short(time.Duration(i+1)*w), len(os), errs, latencyCell(os))
		for _, p := range protocols {
			var mine []outcome
			for _, o := range os {
				if o.protocol == p {
					mine = append(mine, o)
				}
			}
			fmt.Fprintf(b, " %s |", latencyCell(mine))
		}
		b.WriteString("\n")
	}
}

// driftTable writes every gauge's fit after warm-up and its verdict, and
// returns whether every judged gauge is flat.
func driftTable(b *strings.Builder, samples []sample, from time.Time, threshold float64) bool {
	fmt.Fprintf(b, "| gauge | samples | first | last | mean | slope per hour (± std. error) | %% of mean per hour | verdict (flat within ±%g %%/h) |\n", threshold)
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	flat := true
	for _, g := range gauges {
		f := fitGauge(g, samples, from)
		v := f.verdict(threshold)
		if g.judged && v != "flat" {
			flat = false
		}
		if !g.judged {
			v += " (not judged)"
		}
		unit := ""
		if g.unit != "" {
			unit = " " + g.unit
		}
		fmt.Fprintf(b, "| %s | %d | %.1f%s | %.1f%s | %.1f%s | %+.2f ± %.2f%s | %+.2f ± %.2f | %s |\n",
			g.name, f.n, f.first, unit, f.last, unit, f.mean, unit, f.slope, f.slopeStdErr, unit, f.slopePct, f.stdErrPct, v)
	}
	return flat
}

// errorSummary writes the failures grouped by workload and message (the
// first 120 bytes), most frequent first, at most ten.
func errorSummary(b *strings.Builder, outcomes []outcome) {
	counts := map[string]int{}
	for _, o := range outcomes {
		if o.err != nil {
			msg := o.err.Error()
			counts[o.workload+": "+msg[:min(len(msg), 120)]]++
		}
	}
	if len(counts) == 0 {
		b.WriteString("No errors: every exchange answered 200 with a complete answer.\n")
		return
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, c string) int { return cmp.Or(counts[c]-counts[a], strings.Compare(a, c)) })
	for i, k := range keys {
		if i == 10 {
			fmt.Fprintf(b, "- … and %d other kinds\n", len(keys)-10)
			break
		}
		fmt.Fprintf(b, "- %d × %s\n", counts[k], strings.ReplaceAll(k, "\n", " "))
	}
}

// workloadTable writes, per workload, the exchanges and errors.
func workloadTable(b *strings.Builder, outcomes []outcome) {
	type tally struct{ n, errs int }
	by := map[string]*tally{}
	for _, o := range outcomes {
		t := by[o.workload]
		if t == nil {
			t = &tally{}
			by[o.workload] = t
		}
		t.n++
		if o.err != nil {
			t.errs++
		}
	}
	b.WriteString("| workload | exchanges | errors |\n| --- | ---: | ---: |\n")
	for _, name := range slices.Sorted(maps.Keys(by)) {
		fmt.Fprintf(b, "| %s | %d | %d |\n", name, by[name].n, by[name].errs)
	}
}

// short writes d without trailing zero units: 5m, 2m30s, 1h, 20s, 0.
func short(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// render writes the report: intro, then the drift table and its verdict,
// where the RSS and Redis's memory are, the latency windows, the workloads, the checks and the
// errors. It
// returns the text and whether every judged gauge is flat.
func render(intro string, c config, begin time.Time, samples []sample, outcomes []outcome, checks string) (string, bool) {
	var b strings.Builder
	b.WriteString(intro)
	fmt.Fprintf(&b, "### Drift after warm-up (the first %s left out), a sample every %s\n\n", short(c.warmup), short(c.every))
	flat := driftTable(&b, samples, begin.Add(c.warmup), c.threshold)
	verdict := "PASS: every judged gauge is flat"
	if !flat {
		verdict = "NOT FLAT: see the verdicts above"
	}
	fmt.Fprintf(&b, "\n%s.\n\n### Where the RSS is\n\n", verdict)
	whereSection(&b, samples, begin, c.warmup, c.window, c.duration)
	b.WriteString("\n### Where Redis's memory is\n\n")
	if i := slices.IndexFunc(samples, func(s sample) bool { return !s.at.Before(begin.Add(c.warmup)) }); i >= 0 {
		redisSection(&b, samples[i], samples[len(samples)-1])
	} else {
		b.WriteString("No sample after warm-up.\n")
	}
	fmt.Fprintf(&b, "\n### Latency per %s window (successful exchanges; streams to their last event)\n\n", short(c.window))
	windowTable(&b, outcomes, begin, c.duration, c.window)
	b.WriteString("\n### Workloads\n\n")
	workloadTable(&b, outcomes)
	b.WriteString("\n### Checks\n\n")
	b.WriteString(checks)
	b.WriteString("\n### Errors\n\n")
	errorSummary(&b, outcomes)
	return b.String(), flat
}
