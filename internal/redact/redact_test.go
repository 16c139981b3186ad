package redact

import (
	"strings"
	"testing"
)

func policy(t testing.TB, spec Spec) *Policy {
	t.Helper()
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func all(action string) Spec {
	s := Spec{Detectors: map[string]string{}, Restore: true}
	for _, d := range Detectors() {
		s.Detectors[d] = action
	}
	return s
}

// found returns what the detector named finds in text, as the values.
func found(t *testing.T, det, text string) []string {
	t.Helper()
	p := policy(t, Spec{Detectors: map[string]string{det: "log"}})
	out, findings := p.NewSession().Apply(text)
	if out != text {
		t.Fatalf("log changed the text: %q", out)
	}
	var values []string
	for _, f := range findings {
		if f.Detector != det || f.Action != Log {
			t.Fatalf("finding %+v, want detector %s, action log", f, det)
		}
		values = append(values, text[f.Start:f.End])
	}
	return values
}

func TestDetectors(t *testing.T) {
	cases := []struct {
		det, text string
		want      []string
	}{
		{"email", "write to alice.smith+tag@example.co.uk today", []string{"alice.smith+tag@example.co.uk"}},
		{"email", "请联系张三：zhang.san@163.com，谢谢", []string{"zhang.san@163.com"}},
		{"email", "a@b.c, @user, user@localhost, x@1.2, name@domain., logo@2x.png", nil},
		{"email", "two: a.b@x.io and c_d@y.org.", []string{"a.b@x.io", "c_d@y.org"}},
		{"email", `import "github.com/foo@v1.2.3"`, nil},

		{"phone", "我的手机号是13812345678，请回电", []string{"13812345678"}},
		{"phone", "call +86 138 1234 5678 or 86-139-8765-4321", []string{"+86 138 1234 5678", "86-139-8765-4321"}},
		{"phone", "US office +1 (415) 555-0132, UK +44 20 7946 0958.", []string{"+1 (415) 555-0132", "+44 20 7946 0958"}},
		{"phone", "order 12812345678, id 138123456789, 1381234567, v13812345678, 2+2=4, +12 3", nil},

		{"cn_id", "身份证号11010519491231002X，已核实", []string{"11010519491231002X"}},
		{"cn_id", "id 110105194912310021 ok", nil}, // bad checksum
		{"cn_id", "110105194913310028 (month 13), 0110105194912310021", nil},

		{"card", "card 4111 1111 1111 1111 exp 12/29", []string{"4111 1111 1111 1111"}},
		{"card", "卡号5500-0000-0000-0004。", []string{"5500-0000-0000-0004"}},
		{"card", "amex 378282246310005, unionpay 6212345678901232", []string{"378282246310005", "6212345678901232"}},
		{"card", "4111 1111 1111 1112 (Luhn fails), ts 1700000000000, 41111111 11111111", nil},

		{"iban", "IBAN DE89 3704 0044 0532 0130 00 please", []string{"DE89 3704 0044 0532 0130 00"}},
		{"iban", "账户GB82WEST12345698765432转账", []string{"GB82WEST12345698765432"}},
		{"iban", "DE89370400440532013001 GB82WEST1234569876543 ZZ89370400440532013000", nil},

		{"ipv4", "server 192.168.1.20 and 8.8.8.8:53", []string{"192.168.1.20", "8.8.8.8"}},
		{"ipv4", "IP地址是10.0.0.1。", []string{"10.0.0.1"}},
		{"ipv4", "version 1.2.3.4.5, 256.1.1.1, 01.2.3.4, v1.2.3.4, 1.2.3", nil},

		{"ipv6", "host 2001:db8:85a3::8a2e:370:7334 and fe80::1", []string{"2001:db8:85a3::8a2e:370:7334", "fe80::1"}},
		{"ipv6", "地址：2001:0db8:0000:0000:0000:ff00:0042:8329。", []string{"2001:0db8:0000:0000:0000:ff00:0042:8329"}},
		{"ipv6", "a[1::2] std::vector Foo::bar 12:30:45 00:1a:2b:3c:4d:5e ::", nil},

		{"api_key", "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t done", []string{"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"}},
		{"api_key", "用这个sk-ant-api03-xY7zQ2wE9rT4yU1iO6pA3sD8f。", []string{"sk-ant-api03-xY7zQ2wE9rT4yU1iO6pA3sD8f"}},
		{"api_key", "AKIAIOSFODNN7EXAMPLE ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 xoxb-123456789012-abcdef AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
			[]string{"AKIAIOSFODNN7EXAMPLE", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "xoxb-123456789012-abcdef", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"}},
		{"api_key", "token Zq8Xv2Lm9Rt4Yp7Kd3Wn6Hs1Bf5Jc0Ga", []string{"Zq8Xv2Lm9Rt4Yp7Kd3Wn6Hs1Bf5Jc0Ga"}},
		{"api_key", "sk-short1 task-manager-2024 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 " +
			"123e4567-e89b-12d3-a456-426614174000 TestCatalogReferenceDocumentsEveryField2 AKIAIOSFODNN7EXAMPLEX", nil},
	}
	for _, c := range cases {
		got := found(t, c.det, c.text)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s in %q: found %q, want %q", c.det, c.text, got, c.want)
		}
	}
}

func TestMaskIsConsistentWithinASession(t *testing.T) {
	p := policy(t, Spec{Detectors: map[string]string{"email": "mask", "phone": "mask"}, Restore: true})
	s := p.NewSession()
	a, _ := s.Apply("mail bob@x.io or ann@y.io, call 13812345678")
	b, findings := s.Apply("again: ann@y.io 和 13912345678")
	if want := "mail [EMAIL_1] or [EMAIL_2], call [PHONE_1]"; a != want {
		t.Errorf("first part %q, want %q", a, want)
	}
	if want := "again: [EMAIL_2] 和 [PHONE_2]"; b != want {
		t.Errorf("second part %q, want %q", b, want)
	}
	if len(findings) != 2 || findings[0].Action != Mask {
		t.Errorf("findings %+v", findings)
	}
	if got := s.Restore("[EMAIL_2] said [PHONE_1]; [EMAIL_3] is not ours, [EMAIL_2"); got != "ann@y.io said 13812345678; [EMAIL_3] is not ours, [EMAIL_2" {
		t.Errorf("restored %q", got)
	}
}

func TestRestoreJSONEscapesValues(t *testing.T) {
	p := policy(t, Spec{Patterns: []PatternSpec{{Name: "quoted", Regex: `say "[a-z]+"`, Action: "mask"}}})
	s := p.NewSession()
	out, _ := s.Apply(`they say "hi"`)
	if got := s.RestoreJSON(`{"text":"` + out + `"}`); got != `{"text":"they say \"hi\""}` {
		t.Errorf("RestoreJSON = %s", got)
	}
}

func TestBlockAndLogLeaveTheText(t *testing.T) {
	p := policy(t, Spec{Detectors: map[string]string{"card": "block", "email": "log"}})
	s := p.NewSession()
	text := "pay with 4111111111111111, mail a@b.io"
	out, findings := s.Apply(text)
	if out != text || s.Blocked() != "card" || s.Masked() || len(findings) != 2 {
		t.Errorf("out %q blocked %q findings %+v", out, s.Blocked(), findings)
	}
	if s2 := p.NewSession(); s2.Blocked() != "" {
		t.Error("a new session starts unblocked")
	}
}

func TestPatterns(t *testing.T) {
	p := policy(t, Spec{Patterns: []PatternSpec{{Name: "employee_id", Regex: `\bEMP-\d{6}\b`, Action: "mask"}}})
	out, _ := p.NewSession().Apply("员工EMP-004211 and EMP-12")
	if out != "员工[EMPLOYEE_ID_1] and EMP-12" {
		t.Errorf("out %q", out)
	}
	for _, bad := range []Spec{
		{Detectors: map[string]string{"ssn": "mask"}},
		{Detectors: map[string]string{"email": "hide"}},
		{Patterns: []PatternSpec{{Name: "x", Regex: "(", Action: "mask"}}},
		{Patterns: []PatternSpec{{Name: "x", Regex: "a*", Action: "mask"}}},
		{Patterns: []PatternSpec{{Name: "Email", Regex: "a", Action: "mask"}}},
		{Patterns: []PatternSpec{{Name: "email", Regex: "a", Action: "mask"}}},
		{Patterns: []PatternSpec{{Name: "x", Regex: "a", Action: "drop"}}},
	} {
		if _, err := Compile(bad); err == nil {
			t.Errorf("Compile(%+v) accepted", bad)
		}
	}
}

func TestMergeTakesTheStrictestAction(t *testing.T) {
	a := policy(t, Spec{Detectors: map[string]string{"email": "log", "phone": "mask"}})
	b := policy(t, Spec{Detectors: map[string]string{"email": "block", "ipv4": "log"}, Restore: true,
		Patterns: []PatternSpec{{Name: "ticket", Regex: `T-\d+`, Action: "log"}}})
	m := Merge(nil, a, b, nil)
	if m.actions[Email] != Block || m.actions[Phone] != Mask || m.actions[IPv4] != Log || m.actions[Card] != None || !m.restore || len(m.patterns) != 1 {
		t.Errorf("merged %+v", m)
	}
	if Merge(nil, a) != a || Merge() != nil || a.actions[Email] != Log {
		t.Error("Merge of one policy is the policy, of none nil, and changes neither")
	}
}

func TestOverlapsPreferTheEarlierLongerFinding(t *testing.T) {
	p := policy(t, all("mask"))
	// a valid ID number that also passes Luhn with a card prefix would be
	// both; an e-mail's digits are not a phone.
	out, findings := p.NewSession().Apply("13812345678@qq.com 11010519491231002X")
	if out != "[EMAIL_1] [CN_ID_1]" {
		t.Errorf("out %q findings %+v", out, findings)
	}
}

func TestNoAllocationWithoutFindings(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes what allocates")
	}
	p := policy(t, all("mask"))
	p.patterns = append(p.patterns, pattern{name: "t", label: "T", re: mustRe(`T-\d{5}`), action: Mask})
	s := p.NewSession()
	texts := []string{
		strings.Repeat("Plain English prose without any candidate at all. ", 20),
		strings.Repeat("版本 1.2.3 在 2024-05-06 发布，价格 ¥199.00，订单号 20240506123。", 20),
	}
	for _, text := range texts {
		if n := testing.AllocsPerRun(100, func() { s.Apply(text); s.Restore(text) }); n != 0 {
			t.Errorf("%d allocations for %.30q", int(n), text)
		}
	}
}
