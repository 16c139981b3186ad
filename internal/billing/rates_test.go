package billing_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/billing"
)

func TestRateTextRates(t *testing.T) {
	tests := []struct {
		name    string
		give    billing.RateText
		want    billing.Rates
		wantErr string
	}{
		{"LeftOutFallBack", billing.RateText{Input: "0.60", Output: "2.40"},
			billing.Rates{Input: 600_000, Output: 2_400_000, CacheRead: 600_000, CacheWrite: 600_000, Reasoning: 2_400_000}, ""},
		{"GivenApart", billing.RateText{Input: "3", Output: "15", CacheRead: "0.30", CacheWrite: "3.75", Reasoning: "10",
			Request: "0.001", VideoSecond: "0.10", VideoItem: "0.50"},
			billing.Rates{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000, Reasoning: 10_000_000,
				Request: 1000, VideoSecond: 100_000, VideoItem: 500_000}, ""},
		{"ZeroIsFreeNotLeftOut", billing.RateText{Input: "1", CacheRead: "0"}, billing.Rates{Input: 1_000_000, CacheWrite: 1_000_000}, ""},
		{"Negative", billing.RateText{Output: "-1"}, billing.Rates{}, "output: -1 is negative"},
		{"NotMoney", billing.RateText{CacheRead: "1e-3"}, billing.Rates{}, "cache_read: amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.Rates()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Rates() = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Rates() = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCharge(t *testing.T) {
	// Per million: input 3.00, output 15.00, cache read 0.30, cache write
	// 3.75, reasoning 10.00; 0.001 per request; video 0.10/s and 0.50/item.
	rates := billing.Rates{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000, Reasoning: 10_000_000}
	withRequest := rates
	withRequest.Request = 1000
	video := billing.Rates{VideoSecond: 100_000, VideoItem: 500_000, Request: 1000}
	measured := func(prompt, completion, cached, written, reasoning int64) sluice.Usage {
		return sluice.Usage{PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached, CacheWriteTokens: written,
			ReasoningTokens: reasoning, Measured: true}
	}
	tests := []struct {
		name  string
		rates billing.Rates
		usage sluice.Usage
		job   *sluice.JobUsage
		want  billing.Micros
	}{
		{"PlainTokens", rates, measured(1_000_000, 1_000_000, 0, 0, 0), nil, 18_000_000},
		// 1000 prompt tokens: 200 plain × 3 + 500 cached × 0.30 + 300
		// written × 3.75 per million = 600 + 150 + 1125 micro-units.
		{"CacheTokensAtTheirRates", rates, measured(1000, 0, 500, 300, 0), nil, 1875},
		// 100 output of which 40 reasoning: 60×15 + 40×10 = 1300.
		{"ReasoningAtItsRate", rates, measured(0, 100, 0, 0, 40), nil, 1300},
		{"ExactNeedsNoRounding", rates, measured(1, 0, 0, 0, 0), nil, 3},                       // 3e6 / 1e6
		{"NeverZeroThroughRounding", billing.Rates{Input: 1}, measured(1, 0, 0, 0, 0), nil, 1}, // 1/1e6 rounds up
		// Parts are summed before the one rounding: 3 × 0.5 = 1.5 → 2, not 3 × 1.
		{"RoundsTheSumNotEachPart", billing.Rates{Input: 1, CacheRead: 1, CacheWrite: 1}, measured(1_500_000, 0, 500_000, 500_000, 0), nil, 2},
		{"PartsHeldToTheirTotal", rates, measured(100, 10, 500, 500, 50), nil, 100*300_000/1_000_000 + 10*10},
		{"Unmeasured", withRequest, sluice.Usage{PromptTokens: 1000}, nil, 0},
		{"PerRequest", withRequest, measured(0, 0, 0, 0, 0), nil, 1000},
		{"NegativeCountsAreZero", rates, measured(-5, -5, -1, -1, -1), nil, 0},
		{"NegativeRatesAreZero", billing.Rates{Input: -5, Output: 2_000_000}, measured(1000, 1000, 0, 0, 0), nil, 2000},
		{"VideoCompleted", video, sluice.Usage{}, &sluice.JobUsage{State: "completed", Seconds: 8}, 1000 + 800_000 + 500_000},
		{"VideoSecondsToTheMillisecond", video, sluice.Usage{}, &sluice.JobUsage{State: "completed", Seconds: 1.0001}, 1000 + 100_100 + 500_000},
		{"VideoFailedWithLength", video, sluice.Usage{}, &sluice.JobUsage{State: "failed", Seconds: 2}, 1000 + 200_000},
		{"VideoFailedWithNothing", video, sluice.Usage{}, &sluice.JobUsage{State: "failed"}, 0},
		{"VideoNaNSeconds", video, sluice.Usage{}, &sluice.JobUsage{State: "completed", Seconds: math.NaN()}, 1000 + 500_000},
		{"Saturates", billing.Rates{Input: math.MaxInt64, Output: math.MaxInt64}, measured(math.MaxInt64, math.MaxInt64, 0, 0, 0), nil, math.MaxInt64},
		{"SaturatesJustAbove", billing.Rates{Input: math.MaxInt64}, measured(1_000_001, 0, 0, 0, 0), nil, math.MaxInt64},
		{"LargestThatFits", billing.Rates{Input: math.MaxInt64}, measured(1_000_000, 0, 0, 0, 0), nil, math.MaxInt64},
		{"LargeExact", billing.Rates{Input: 1 << 40}, measured(1_000_000, 0, 0, 0, 0), nil, 1 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rates.Charge(tt.usage, tt.job); got != tt.want {
				t.Errorf("Charge(%+v, %+v) = %d, want %d", tt.usage, tt.job, got, tt.want)
			}
		})
	}
}

// FuzzCharge checks, for any non-negative rates and usage, that a charge
// is never negative, is 0 only when nothing was charged for, and never
// falls when more tokens are used: more prompt or completion tokens, or
// more tokens of a part together with its total.
func FuzzCharge(f *testing.F) {
	f.Add(int64(3_000_000), int64(15_000_000), int64(300_000), int64(3_750_000), int64(10_000_000), int64(1000),
		int64(1000), int64(200), int64(100), int64(50), int64(20), uint32(7))
	f.Add(int64(math.MaxInt64), int64(1), int64(0), int64(math.MaxInt64), int64(0), int64(0),
		int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64-1), int64(5), int64(math.MaxInt64), uint32(1<<31))
	f.Fuzz(func(t *testing.T, in, out, cacheRead, cacheWrite, reasoning, request,
		prompt, completion, cached, written, reasoned int64, more uint32) {
		rates := billing.Rates{Input: abs(in), Output: abs(out), CacheRead: abs(cacheRead), CacheWrite: abs(cacheWrite),
			Reasoning: abs(reasoning), Request: abs(request)}
		u := sluice.Usage{PromptTokens: absInt(prompt), CompletionTokens: absInt(completion), CachedTokens: absInt(cached),
			CacheWriteTokens: absInt(written), ReasoningTokens: absInt(reasoned), Measured: true}
		base := rates.Charge(u, nil)
		if base < 0 {
			t.Fatalf("Charge(%+v) at %+v = %d < 0", u, rates, base)
		}
		if base == 0 && rates.Request > 0 {
			t.Fatalf("Charge(%+v) at %+v = 0 with a request rate", u, rates)
		}
		n := int64(more)
		grow := map[string]func(u *sluice.Usage) []*int64{ // the counts that grow together
			"prompt":      func(u *sluice.Usage) []*int64 { return []*int64{&u.PromptTokens} },
			"completion":  func(u *sluice.Usage) []*int64 { return []*int64{&u.CompletionTokens} },
			"cached":      func(u *sluice.Usage) []*int64 { return []*int64{&u.PromptTokens, &u.CachedTokens} },
			"cache_write": func(u *sluice.Usage) []*int64 { return []*int64{&u.PromptTokens, &u.CacheWriteTokens} },
			"reasoning":   func(u *sluice.Usage) []*int64 { return []*int64{&u.CompletionTokens, &u.ReasoningTokens} },
		}
		for name, counts := range grow {
			bigger := u
			grown := counts(&bigger)
			if slices.ContainsFunc(grown, func(c *int64) bool { return *c > math.MaxInt64-n }) {
				continue // would overflow: not more tokens
			}
			for _, c := range grown {
				*c += n
			}
			if got := rates.Charge(bigger, nil); got < base {
				t.Fatalf("more %s tokens cost less: Charge(%+v) = %d < Charge(%+v) = %d at %+v", name, bigger, got, u, base, rates)
			}
		}
	})
}

func abs(n int64) billing.Micros { return billing.Micros(absInt(n)) }

func absInt(n int64) int64 {
	if n < 0 {
		return ^n // -n overflows for the most negative
	}
	return n
}
