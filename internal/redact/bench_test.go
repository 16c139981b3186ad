package redact

import (
	"strings"
	"testing"
)

// benchPrompts are about 4 KiB of prompt text each: English and Chinese
// prose with numbers, dates and versions (no sensitive value), and the
// same with an e-mail address, a phone number, a card number and an IP
// address in every paragraph.
func benchPrompts() map[string]string {
	english := "Please summarise the release notes for version 3.11.4, published on 2024-06-15: it fixes 27 bugs, " +
		"raises the default timeout from 10s to 30s and costs $19.99 per month. The meeting is at 14:30 in room 402. "
	chinese := "请总结版本3.11.4的发布说明：该版本于2024年6月15日发布，修复了27个问题，把默认超时从10秒提高到30秒，每月费用19.99元。会议在下午2点30分，402室。"
	findings := " Contact alice.liu@example.com or +86 138 1234 5678, card 4111 1111 1111 1111, server 10.20.30.40. "
	fill := func(paragraph string) string {
		return strings.Repeat(paragraph, 4096/len(paragraph)+1)[:4096]
	}
	return map[string]string{
		"english":          fill(english),
		"english-findings": fill(english + findings),
		"chinese":          fill(chinese),
		"chinese-findings": fill(chinese + findings),
	}
}

// BenchmarkApply measures a policy with every detector masking, over 4 KiB
// prompts, and reports ns per KiB of prompt.
//
//	go test -run '^$' -bench Apply -benchmem ./internal/redact/
func BenchmarkApply(b *testing.B) {
	p := policy(b, all("mask"))
	for _, name := range []string{"english", "english-findings", "chinese", "chinese-findings"} {
		text := benchPrompts()[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				p.NewSession().Apply(text)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(text))/1024), "ns/KiB")
		})
	}
}
