package billing

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice"
)

// Rates are what one usage is charged at. Token rates are per million
// tokens; the others per request, per second of video and per video item.
// Every field is resolved: CacheRead, CacheWrite and Reasoning that a price
// leaves out already equal Input, Input and Output (see RateText), so a
// zero here means free.
type Rates struct {
	Input       Micros `json:"input"`
	Output      Micros `json:"output"`
	CacheRead   Micros `json:"cache_read"`
	CacheWrite  Micros `json:"cache_write"`
	Reasoning   Micros `json:"reasoning"`
	Request     Micros `json:"request"`
	VideoSecond Micros `json:"video_second"`
	VideoItem   Micros `json:"video_item"`
}

// RateText is rates as an operator writes them (the catalog, the admin
// API): decimal strings, "" for a rate left out. Rates resolves them.
type RateText struct {
	Input       string `json:"input,omitempty" yaml:"input"`
	Output      string `json:"output,omitempty" yaml:"output"`
	CacheRead   string `json:"cache_read,omitempty" yaml:"cache_read"`
	CacheWrite  string `json:"cache_write,omitempty" yaml:"cache_write"`
	Reasoning   string `json:"reasoning,omitempty" yaml:"reasoning"`
	Request     string `json:"request,omitempty" yaml:"request"`
	VideoSecond string `json:"video_second,omitempty" yaml:"video_second"`
	VideoItem   string `json:"video_item,omitempty" yaml:"video_item"`
}

// Rates parses the text. A rate left out is 0, except that cache_read and
// cache_write fall back to input and reasoning to output: an upstream that
// bills cached or reasoning tokens apart says so, and one that does not
// bills them as the tokens they are part of. Negative rates are errors.
func (t RateText) Rates() (Rates, error) {
	var r Rates
	for _, f := range []struct {
		name string
		text string
		to   *Micros
	}{
		{"input", t.Input, &r.Input}, {"output", t.Output, &r.Output},
		{"cache_read", t.CacheRead, &r.CacheRead}, {"cache_write", t.CacheWrite, &r.CacheWrite},
		{"reasoning", t.Reasoning, &r.Reasoning}, {"request", t.Request, &r.Request},
		{"video_second", t.VideoSecond, &r.VideoSecond}, {"video_item", t.VideoItem, &r.VideoItem},
	} {
		if f.text == "" {
			continue
		}
		m, err := ParseMoney(f.text)
		if err != nil {
			return Rates{}, fmt.Errorf("%s: %w", f.name, err)
		}
		if m < 0 {
			return Rates{}, fmt.Errorf("%s: %s is negative", f.name, f.text)
		}
		if err := CheckBound(m); err != nil {
			return Rates{}, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.to = m
	}
	if t.CacheRead == "" {
		r.CacheRead = r.Input
	}
	if t.CacheWrite == "" {
		r.CacheWrite = r.Input
	}
	if t.Reasoning == "" {
		r.Reasoning = r.Output
	}
	return r, nil
}

// Validate reports a negative rate, which no price may have, or one
// beyond MaxAmount.
func (r Rates) Validate() error {
	for name, m := range map[string]Micros{
		"input": r.Input, "output": r.Output, "cache_read": r.CacheRead, "cache_write": r.CacheWrite,
		"reasoning": r.Reasoning, "request": r.Request, "video_second": r.VideoSecond, "video_item": r.VideoItem,
	} {
		if m < 0 {
			return fmt.Errorf("%s: %s is negative", name, m)
		}
		if err := CheckBound(m); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Measured reports whether a request's usage was measured well enough to be
// charged: the upstream reported its tokens, or (an async job) the job
// completed or reported a length. A usage record that is not is marked
// unmeasured and never charged by guess.
func Measured(u sluice.Usage, job *sluice.JobUsage) bool {
	return u.Measured || job != nil && (job.State == sluice.JobCompleted || job.Seconds > 0)
}

// Charge is what a request that consumed u (and, for an async job, job)
// costs at these rates; 0 when it was not Measured.
//
// sluice.Usage counts cached and cache-write tokens within PromptTokens and
// reasoning tokens within CompletionTokens, so those are charged at their
// own rates and the rest of each at Input and Output. A part reported larger
// than its total is held to the total: a request is never charged for more
// tokens than it used. Token parts count only when u.Measured; the request
// rate applies to every measured request; a job adds its seconds (to the
// millisecond) and, when it completed, one item.
//
// Every part is summed exactly (128-bit) in millionths of a micro-unit, then
// divided once, rounding up: a usage that costs anything never costs 0.
// The result is held at the largest amount rather than overflowing, and is
// never negative (a negative rate counts as 0).
func (r Rates) Charge(u sluice.Usage, job *sluice.JobUsage) Micros {
	if !Measured(u, job) {
		return 0
	}
	var s sum
	if u.Measured {
		prompt, completion := max(u.PromptTokens, 0), max(u.CompletionTokens, 0)
		cached := min(max(u.CachedTokens, 0), prompt)
		written := min(max(u.CacheWriteTokens, 0), prompt-cached)
		reasoning := min(max(u.ReasoningTokens, 0), completion)
		s.add(prompt-cached-written, r.Input)
		s.add(cached, r.CacheRead)
		s.add(written, r.CacheWrite)
		s.add(completion-reasoning, r.Output)
		s.add(reasoning, r.Reasoning)
	}
	s.add(perMillion, r.Request)
	if job != nil {
		s.add(videoMillis(job.Seconds)*(perMillion/1000), r.VideoSecond)
		if job.State == sluice.JobCompleted {
			s.add(perMillion, r.VideoItem)
		}
	}
	return s.micros()
}

// perMillion is the count that, times a rate, is that rate once: the sum is
// kept in millionths of a micro-unit because token rates are per million.
const perMillion = 1_000_000

// videoMillis is a job's reported seconds in whole milliseconds, rounded
// up; 0 for a length that is not a positive number, and held far below
// overflow for an absurd one.
func videoMillis(seconds float64) int64 {
	const most = 1 << 40 // about 35 years of video
	switch ms := math.Ceil(seconds * 1000); {
	case !(ms > 0): // also NaN
		return 0
	case ms > most:
		return most
	default:
		return int64(ms)
	}
}

// sum is an unsigned 128-bit total that sticks at its largest value once
// it would overflow.
type sum struct {
	hi, lo   uint64
	overflow bool
}

// add adds n × rate; negative factors count as 0.
func (s *sum) add(n int64, rate Micros) {
	if n <= 0 || rate <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(n), uint64(rate))
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, lo, 0)
	s.hi, carry = bits.Add64(s.hi, hi, carry)
	if carry != 0 {
		s.overflow = true
	}
}

// micros divides the total by a million, rounding up, held at the largest
// amount.
func (s *sum) micros() Micros {
	if s.overflow || s.hi >= perMillion { // the quotient would not fit 64 bits
		return math.MaxInt64
	}
	q, rem := bits.Div64(s.hi, s.lo, perMillion)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if rem != 0 {
		q++
	}
	return Micros(q)
}
