package redact

import (
	"regexp"
	"strings"
	"testing"
)

func mustRe(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// masked returns a session that has masked a few values.
func masked(t testing.TB) *Session {
	p := policy(t, all("mask"))
	s := p.NewSession()
	s.Apply("a@b.io c@d.io 13812345678 10.0.0.1 e@f.io g@h.io i@j.io k@l.io m@n.io o@p.io q@r.io s@t.io u@v.io")
	return s
}

func TestStreamHoldsASplitPlaceholder(t *testing.T) {
	s := masked(t)
	r := s.Stream()
	var out []string
	for _, d := range []string{"Mail [EMA", "IL_1] and [", "PHONE_1] at [IP", "_1]. [EMAIL_1", "0] [EMAIL_", "1x] [E"} {
		out = append(out, r.Feed(d))
	}
	out = append(out, r.Flush())
	want := []string{"Mail ", "a@b.io and ", "13812345678 at ", "10.0.0.1. ", "s@t.io ", "[EMAIL_1x] ", "[E"}
	if strings.Join(out, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", out, want)
	}
}

func FuzzStreamEqualsWhole(f *testing.F) {
	f.Add("say [EMAIL_1] to [PHONE_1] at [IP_1], [EMAIL_10] [[EMAIL_2]] [EMAIL_", uint64(0x123456789))
	f.Add("中文[EMAIL_3]文本[IP_1][IP_1", uint64(7))
	f.Fuzz(func(t *testing.T, text string, cuts uint64) {
		s := masked(t)
		whole := s.Restore(text)
		r := s.Stream()
		var b strings.Builder
		rest := text
		for len(rest) > 0 {
			n := int(cuts%7) + 0
			cuts = cuts/7 + cuts%3
			n = min(n, len(rest))
			b.WriteString(r.Feed(rest[:n]))
			rest = rest[n:]
			if n == 0 && cuts == 0 {
				b.WriteString(r.Feed(rest))
				rest = ""
			}
		}
		b.WriteString(r.Flush())
		if b.String() != whole {
			t.Fatalf("streamed %q, whole %q", b.String(), whole)
		}
	})
}
