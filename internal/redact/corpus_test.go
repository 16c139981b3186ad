package redact

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// planted is a value of a known kind put into a synthetic prompt.
type planted struct{ detector, value string }

// generators make a random value of each kind, in the forms people write.
var generators = map[string]func(r *rand.Rand) string{
	"email": func(r *rand.Rand) string {
		users := []string{"alice", "bob.smith", "zhang.wei", "li_na+work", "j.doe", "wang-fang", "ops", "chen88"}
		domains := []string{"example.com", "mail.example.org", "163.com", "qq.com", "corp.example.cn", "uni.example.ac.uk"}
		return fmt.Sprintf("%s%d@%s", users[r.IntN(len(users))], r.IntN(100), domains[r.IntN(len(domains))])
	},
	"phone": func(r *rand.Rand) string {
		mobile := fmt.Sprintf("1%d%09d", 3+r.IntN(7), r.IntN(1e9))
		switch r.IntN(5) {
		case 0:
			return mobile
		case 1:
			return mobile[:3] + " " + mobile[3:7] + " " + mobile[7:]
		case 2:
			return "+86 " + mobile
		case 3:
			return fmt.Sprintf("+1 (%03d) %03d-%04d", 200+r.IntN(700), 200+r.IntN(700), r.IntN(10000))
		}
		return fmt.Sprintf("+44 20 %04d %04d", r.IntN(10000), r.IntN(10000))
	},
	"cn_id": func(r *rand.Rand) string {
		body := fmt.Sprintf("%d%05d%04d%02d%02d%03d", 1+r.IntN(6), r.IntN(1e5), 1950+r.IntN(60), 1+r.IntN(12), 1+r.IntN(28), r.IntN(1000))
		sum := 0
		for i, w := range cnIDWeights {
			sum += int(body[i]-'0') * w
		}
		return body + string("10X98765432"[sum%11])
	},
	"card": func(r *rand.Rand) string {
		prefixes := []string{"4", "51", "55", "2221", "34", "37", "6011", "62", "3530"}
		p := prefixes[r.IntN(len(prefixes))]
		n := 16
		if p == "34" || p == "37" {
			n = 15
		}
		digits := []byte(p)
		for len(digits) < n-1 {
			digits = append(digits, byte('0'+r.IntN(10)))
		}
		for c := byte('0'); c <= '9'; c++ {
			if luhn(append(digits[:n-1:n-1], c)) {
				digits = append(digits, c)
				break
			}
		}
		if n == 16 && r.IntN(2) == 0 {
			sep := []string{" ", "-"}[r.IntN(2)]
			return string(digits[:4]) + sep + string(digits[4:8]) + sep + string(digits[8:12]) + sep + string(digits[12:])
		}
		return string(digits)
	},
	"iban": func(r *rand.Rand) string {
		var country, bban string
		switch r.IntN(3) {
		case 0:
			country, bban = "DE", fmt.Sprintf("%08d%010d", r.IntN(1e8), r.IntN(1e10))
		case 1:
			country, bban = "GB", fmt.Sprintf("%s%06d%08d", []string{"WEST", "NWBK", "BARC"}[r.IntN(3)], r.IntN(1e6), r.IntN(1e8))
		default:
			country, bban = "FR", fmt.Sprintf("%010d%011d%02d", r.IntN(1e10), r.IntN(1e11), r.IntN(100))
		}
		check := 98 - mod97([]byte(country+"00"+bban))
		iban := fmt.Sprintf("%s%02d%s", country, check, bban)
		if r.IntN(2) == 0 {
			var groups []string
			for i := 0; i < len(iban); i += 4 {
				groups = append(groups, iban[i:min(i+4, len(iban))])
			}
			return strings.Join(groups, " ")
		}
		return iban
	},
	"ipv4": func(r *rand.Rand) string {
		return fmt.Sprintf("%d.%d.%d.%d", 1+r.IntN(223), r.IntN(256), r.IntN(256), 1+r.IntN(254))
	},
	"ipv6": func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return fmt.Sprintf("2001:db8:%x:%x::%x", r.IntN(0x10000), r.IntN(0x10000), 1+r.IntN(0xffff))
		}
		return fmt.Sprintf("fe80::%x:%x:%x:%x", r.IntN(0x10000), r.IntN(0x10000), r.IntN(0x10000), 1+r.IntN(0xffff))
	},
	"api_key": func(r *rand.Rand) string {
		const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		rnd := func(n int, alphabet string) string {
			b := make([]byte, n)
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			b[r.IntN(n)] = byte('0' + r.IntN(10)) // random keys have a digit
			return string(b)
		}
		switch r.IntN(7) {
		case 0:
			return "sk-proj-" + rnd(48, alnum+"_-")
		case 1:
			return "sk-ant-api03-" + rnd(40, alnum+"_-")
		case 2:
			return "AKIA" + rnd(16, alnum[:26]+alnum[52:])
		case 3:
			return "ghp_" + rnd(36, alnum)
		case 4:
			return "xoxb-" + rnd(12, alnum[52:]) + "-" + rnd(24, alnum)
		case 5:
			return "AIza" + rnd(35, alnum+"_-")
		}
		return rnd(40, alnum)
	},
}

var englishTemplates = []string{
	"Please update my profile, my contact is %s and I need it done today.",
	"Summarise this ticket: the customer (%s) reported a failed payment twice.",
	"Translate to French: \"You can reach our support at %s anytime.\"",
	"Here is the log line: user=%s action=login result=ok. What went wrong?",
	"Draft an e-mail confirming that %s was added to the allow list.",
	"My colleague said to use %s, is that right?",
}

var chineseTemplates = []string{
	"请帮我核对一下这个信息：%s，谢谢。",
	"客户反馈说%s无法使用，请分析原因。",
	"把下面这句话翻译成英文：我的资料是%s。",
	"日志里出现了%s，这是什么意思？",
	"请记住：%s，稍后我会再问你。",
	"总结这封邮件：对方提供了%s并要求尽快处理。",
}

// corpus makes n seeded prompts, each with one to three planted values.
func corpus(n int) ([]string, [][]planted) {
	r := rand.New(rand.NewPCG(29, 2))
	kinds := Detectors()
	prompts := make([]string, n)
	plants := make([][]planted, n)
	for i := range prompts {
		templates := englishTemplates
		if i%2 == 1 {
			templates = chineseTemplates
		}
		var parts []string
		for range 1 + r.IntN(3) {
			kind := kinds[r.IntN(len(kinds))]
			v := generators[kind](r)
			plants[i] = append(plants[i], planted{kind, v})
			parts = append(parts, fmt.Sprintf(templates[r.IntN(len(templates))], v))
		}
		prompts[i] = strings.Join(parts, " ")
	}
	return prompts, plants
}

// TestCorpusPlantedValues masks or blocks every planted value of 1,000
// prompts as configured, and restores the masked prompts exactly.
func TestCorpusPlantedValues(t *testing.T) {
	spec := all("mask")
	spec.Detectors["cn_id"], spec.Detectors["card"] = "block", "block"
	p := policy(t, spec)
	prompts, plants := corpus(1000)
	counts := map[string]int{}
	for i, prompt := range prompts {
		s := p.NewSession()
		out, findings := s.Apply(prompt)
		for _, pl := range plants[i] {
			counts[pl.detector]++
			want := p.actions[detectorIndex(pl.detector)]
			if want == Mask && strings.Contains(out, pl.value) {
				t.Errorf("prompt %d: %s %q not masked: %q", i, pl.detector, pl.value, out)
			}
			if !hasFinding(prompt, findings, pl, want) {
				t.Errorf("prompt %d: %s %q not found as %s: %+v", i, pl.detector, pl.value, want, findings)
			}
			if want == Block && s.Blocked() == "" {
				t.Errorf("prompt %d: %s %q did not block", i, pl.detector, pl.value)
			}
		}
		if back := s.Restore(out); back != prompt {
			t.Errorf("prompt %d: round trip\n got %q\nwant %q", i, back, prompt)
		}
	}
	t.Logf("planted values by kind: %v", counts)
}

// hasFinding reports whether a finding of the planted value's detector
// (an IP of either family for the ip detectors) covers it with action want.
func hasFinding(text string, findings []Finding, pl planted, want Action) bool {
	for _, f := range findings {
		if f.Detector == pl.detector && f.Action == want && text[f.Start:f.End] == pl.value {
			return true
		}
	}
	return false
}

// TestControlCorpusFalsePositives runs every detector over code and prose
// that has no sensitive value: the hand-written lines of
// testdata/control.txt and seeded lines of identifiers, hashes, UUIDs,
// versions, dates, prices and order numbers. Fewer than 1% of lines may
// have a finding.
func TestControlCorpusFalsePositives(t *testing.T) {
	f, err := os.Open("testdata/control.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	handWritten := len(lines)
	lines = append(lines, controlLines(1000)...)
	p := policy(t, all("mask"))
	flagged := 0
	for _, line := range lines {
		if _, findings := p.NewSession().Apply(line); len(findings) > 0 {
			flagged++
			for _, fd := range findings {
				t.Logf("false positive %s %q in %q", fd.Detector, line[fd.Start:fd.End], line)
			}
		}
	}
	rate := float64(flagged) / float64(len(lines))
	t.Logf("control corpus: %d lines (%d hand-written), %d with a finding: %.2f%%", len(lines), handWritten, flagged, 100*rate)
	if rate >= 0.01 {
		t.Errorf("false-positive rate %.2f%% (%d of %d lines), want under 1%%", 100*rate, flagged, len(lines))
	}
}

// controlLines makes n seeded lines of values that look like numbers or
// tokens but are not sensitive.
func controlLines(n int) []string {
	r := rand.New(rand.NewPCG(7, 11))
	hex := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = "0123456789abcdef"[r.IntN(16)]
		}
		return string(b)
	}
	makers := []func() string{
		func() string { return "commit " + hex(40) + " merged" },
		func() string { return "sha256:" + hex(64) },
		func() string {
			return fmt.Sprintf("request id %s-%s-%s-%s-%s", hex(8), hex(4), hex(4), hex(4), hex(12))
		},
		func() string {
			return fmt.Sprintf("v%d.%d.%d released on %d-%02d-%02d", r.IntN(20), r.IntN(50), r.IntN(100), 2000+r.IntN(30), 1+r.IntN(12), 1+r.IntN(28))
		},
		func() string {
			return fmt.Sprintf("订单号%d，金额%d.%02d元", 2e10+r.IntN(1e10), r.IntN(10000), r.IntN(100))
		},
		func() string {
			return fmt.Sprintf("Order #%d-%04d total $%d.%02d", 20240000+r.IntN(10000), r.IntN(10000), r.IntN(5000), r.IntN(100))
		},
		func() string {
			return fmt.Sprintf("ts=%d latency=%dms", 1_600_000_000_000+r.Int64N(2e11), r.IntN(5000))
		},
		func() string {
			return fmt.Sprintf("x := compute(%d, %d.%d) // %d%%", r.IntN(1e6), r.IntN(100), r.IntN(1000), r.IntN(100))
		},
		func() string {
			return fmt.Sprintf("at %02d:%02d:%02d.%03d worker-%d finished job %d", r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000), r.IntN(64), r.IntN(1e7))
		},
		func() string {
			return fmt.Sprintf("第%d行：变量count%d的值是%d", r.IntN(500), r.IntN(10), r.IntN(1e9))
		},
	}
	lines := make([]string, n)
	for i := range lines {
		lines[i] = makers[r.IntN(len(makers))]()
	}
	return lines
}
