package sluice_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

func TestMeasureText(t *testing.T) {
	tests := []struct {
		name string
		body string
		want sluice.TextSize
	}{
		{"ASCII", `{"content":"hello there"}`, sluice.TextSize{Chars: 25}},
		{"Chinese", `"你好，世界"`, sluice.TextSize{Chars: 2, CJK: 5}}, // the fullwidth comma is CJK
		{"escaped Chinese", `"\u4f60\u597d"`, sluice.TextSize{Chars: 2, CJK: 2}},
		{"escaped ASCII", `"a\u0041\n"`, sluice.TextSize{Chars: 6}},
		{"a broken escape", `"\u12"`, sluice.TextSize{Chars: 6}},
		{"Japanese and Korean", `ひらがなカタカナ한국어`, sluice.TextSize{CJK: 11}},
		{"accented Latin and Cyrillic", `café привет`, sluice.TextSize{Chars: 11}},
		{"an emoji", `ok 👍`, sluice.TextSize{Chars: 4}},
		{"ideograph extension B", `𠀀`, sluice.TextSize{CJK: 1}},
		{"invalid UTF-8", "a\xffb", sluice.TextSize{Chars: 3}},
	}
	for _, tt := range tests {
		if got := sluice.MeasureText([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: MeasureText(%q) = %+v, want %+v", tt.name, tt.body, got, tt.want)
		}
	}
}

func TestTokenEstimatePrompt(t *testing.T) {
	tests := []struct {
		est  sluice.TokenEstimate
		text sluice.TextSize
		want int64
	}{
		{sluice.TokenEstimate{}, sluice.TextSize{}, 1},
		{sluice.TokenEstimate{}, sluice.TextSize{Chars: 400}, 100},
		{sluice.TokenEstimate{}, sluice.TextSize{Chars: 401}, 101},
		{sluice.TokenEstimate{}, sluice.TextSize{CJK: 300}, 300},
		{sluice.TokenEstimate{}, sluice.TextSize{Chars: 40, CJK: 30}, 40},
		{sluice.TokenEstimate{CharsPerToken: 2, CJKCharsPerToken: 0.5}, sluice.TextSize{Chars: 40, CJK: 30}, 80},
		{sluice.TokenEstimate{CJKCharsPerToken: 0.5}, sluice.TextSize{Chars: 40, CJK: 30}, 70}, // the other field defaults
		{sluice.TokenEstimate{CharsPerToken: 2}, sluice.TextSize{Chars: 40, CJK: 30}, 50},
		{sluice.TokenEstimate{CharsPerToken: 0.1, CJKCharsPerToken: 0.1}, sluice.TextSize{Chars: 1 << 62}, sluice.MaxTokenEstimate},
	}
	for _, tt := range tests {
		if got := tt.est.Prompt(tt.text); got != tt.want {
			t.Errorf("%+v.Prompt(%+v) = %d, want %d", tt.est, tt.text, got, tt.want)
		}
	}
	count := &sluice.Request{CountTokens: true, Text: sluice.TextSize{Chars: 100}, Output: 10}
	if count.Reserve() != 0 {
		t.Errorf("a token count reserves %d, want 0", count.Reserve())
	}
}

// FuzzMeasureText: every byte is counted once — a character of its own, a
// part of a UTF-8 character or of a \uXXXX escape — so the counts never
// pass the body's length, and text without escapes counts as many
// characters as it has runes.
func FuzzMeasureText(f *testing.F) {
	for _, s := range []string{"", "hello", "你好", `\u4f60`, "a\xffb", `\u12`, "👍", strings.Repeat("x", 17)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := sluice.MeasureText(body)
		if got.Chars < 0 || got.CJK < 0 || got.Chars+got.CJK > len(body) {
			t.Fatalf("MeasureText(%q) = %+v: more characters than bytes", body, got)
		}
		if !strings.Contains(string(body), `\`) && got.Chars+got.CJK != utf8.RuneCount(body) {
			t.Fatalf("MeasureText(%q) = %+v, want %d characters", body, got, utf8.RuneCount(body))
		}
	})
}

// FuzzReserve: a reservation covers the prompt's estimate and the output,
// saturating at MaxTokenEstimate, and is never negative.
func FuzzReserve(f *testing.F) {
	f.Add(0, 0, int64(0), 4.0, 1.0)
	f.Add(1<<62, 1<<62, int64(9223372036854775807), 0.1, 0.1)
	f.Add(400, 9, int64(512), 3.5, 0.8)
	f.Add(400, 9, int64(512), 0.0, 0.5)
	f.Fuzz(func(t *testing.T, chars, cjk int, output int64, perToken, cjkPerToken float64) {
		if chars < 0 || cjk < 0 || output < 0 || !(perToken == 0 || perToken >= 0.1 && perToken <= 20) ||
			!(cjkPerToken == 0 || cjkPerToken >= 0.1 && cjkPerToken <= 20) {
			return // what MeasureText, Parse and the catalog never make
		}
		req := &sluice.Request{Text: sluice.TextSize{Chars: chars, CJK: cjk}, Output: output,
			Estimate: sluice.TokenEstimate{CharsPerToken: perToken, CJKCharsPerToken: cjkPerToken}}
		got, prompt := int64(req.Reserve()), req.PromptEstimate()
		if got <= 0 || got > sluice.MaxTokenEstimate || prompt > got {
			t.Fatalf("%+v: Reserve() = %d, prompt %d: want the prompt covered, within (0, %d]", req, got, prompt, int64(sluice.MaxTokenEstimate))
		}
		if got < min(output, sluice.MaxTokenEstimate) {
			t.Fatalf("%+v: Reserve() = %d, want the output %d covered", req, got, output)
		}
	})
}

func BenchmarkMeasureText(b *testing.B) {
	en := []byte(`{"model":"fast","messages":[{"role":"user","content":"` + strings.Repeat("Tell me about the weather in Paris today. ", 24) + `"}]}`)
	zh := []byte(`{"model":"fast","messages":[{"role":"user","content":"` + strings.Repeat("请告诉我今天巴黎的天气。", 24) + `"}]}`)
	for _, c := range []struct {
		name string
		body []byte
	}{{"english", en}, {"chinese", zh}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				sluice.MeasureText(c.body)
			}
		})
	}
}
