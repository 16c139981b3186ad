package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSoakBriefly runs the whole driver for a few seconds against a
// private redis-server: every workload must succeed and the report must
// hold its tables, so the tool cannot rot. SOAK_SLUICE names a sluice
// binary to use instead of building one.
func TestSoakBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway binary for several seconds")
	}
	redisURL := testenv.StartRedis(t).URL()
	bin := os.Getenv("SOAK_SLUICE")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/sluice").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// 150 workloads: one and a half rounds of the weights (which sum to
	// 100), so each workload runs at least once.
	c := config{sluice: bin, redisURL: redisURL, dir: t.TempDir(), duration: 6 * time.Second, rate: 25,
		every: time.Second, window: 3 * time.Second, threshold: 2, logLevel: "info"}
	res, err := run(t.Context(), c, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	if res.errors != 0 {
		t.Errorf("%d of %d exchanges failed; want none:\n%s", res.errors, res.exchanges, res.text)
	}
	want := []string{"video submit", "video poll"}
	for _, w := range workloads() {
		if w.protocol != protoVideos {
			want = append(want, w.name)
		}
	}
	for _, name := range want {
		if res.succeeded[name] == 0 {
			t.Errorf("workload %q never succeeded; report:\n%s", name, res.text)
		}
	}
	if res.samples < 3 {
		t.Errorf("%d samples in 6s at one a second; want at least 3", res.samples)
	}
	for _, row := range []string{"| gateway RSS | ", "| Redis used_memory | ", "| 0–3s | ", "- Affinity", "- Billing", "- Video jobs: "} {
		if !strings.Contains(res.text, row) {
			t.Errorf("the report has no %q:\n%s", row, res.text)
		}
	}
}

func TestVerdict(t *testing.T) {
	hours := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) / 60 // a sample a minute
		}
		return x
	}
	tests := []struct {
		name string
		y    func(i int, x float64) float64
		want string
	}{
		{"constant", func(int, float64) float64 { return 100 }, "flat"},
		{"within threshold", func(_ int, x float64) float64 { return 100 + 1.5*x }, "flat"},
		{"steady growth", func(_ int, x float64) float64 { return 100 + 10*x }, "DRIFT"},
		{"steady shrinking", func(_ int, x float64) float64 { return 100 - 10*x }, "DRIFT"},
		// A slope beyond the threshold, within the noise of samples that
		// jump by 20 % from one to the next.
		{"noise", func(i int, x float64) float64 { return 100 + 5*x + float64(20*(i%2)) }, "inconclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := hours(31)
			y := make([]float64, len(x))
			for i := range x {
				y[i] = tt.y(i, x[i])
			}
			var samples []sample
			start := time.Unix(0, 0)
			for i := range x {
				samples = append(samples, sample{at: start.Add(time.Duration(x[i] * float64(time.Hour))), values: map[string]float64{"g": y[i]}})
			}
			f := fitGauge(gauge{name: "g", scale: 1}, samples, start)
			if got := f.verdict(2); got != tt.want {
				t.Errorf("verdict = %q (slope %.2f ± %.2f %%/h), want %q", got, f.slopePct, f.stdErrPct, tt.want)
			}
		})
	}
}

func TestLeastSquaresOnALine(t *testing.T) {
	b, se := leastSquares([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11})
	if b != 2 || se != 0 {
		t.Errorf("leastSquares = %v ± %v, want 2 ± 0", b, se)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
sluice_affinity_placements_total{alias="sticky",outcome="hit"} 7
sluice_affinity_placements_total{alias="sticky",outcome="new"} 3
sluice_affinity_placements_total{alias="other",outcome="hit"} 1
`
	hit := `sluice_affinity_placements_total{alias="sticky",outcome="hit"}`
	got, err := parseMetrics(strings.NewReader(text), "go_goroutines", hit, "sluice_affinity_placements_total")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"go_goroutines": 42, hit: 7, "sluice_affinity_placements_total": 11}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("parseMetrics = %v, want only %v", got, want)
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{
		{0, "0"},
		{20 * time.Second, "20s"},
		{5 * time.Minute, "5m"},
		{150 * time.Second, "2m30s"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
	}
	for _, tt := range tests {
		if got := short(tt.give); got != tt.want {
			t.Errorf("short(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
