package billing_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/billing"
)

func TestParseMoney(t *testing.T) {
	tests := []struct {
		give    string
		want    billing.Micros
		wantErr string // part of the error; "" = none
	}{
		{give: "0", want: 0},
		{give: "12", want: 12_000_000},
		{give: "0.60", want: 600_000},
		{give: "0.6", want: 600_000},
		{give: "2.40", want: 2_400_000},
		{give: "0.000001", want: 1},
		{give: "-1.5", want: -1_500_000},
		{give: "-0", want: 0},
		{give: "007.5", want: 7_500_000},
		{give: "9223372036854.775807", want: math.MaxInt64},
		{give: "-9223372036854.775808", want: math.MinInt64},
		{give: "", wantErr: "empty"},
		{give: "-", wantErr: "both sides"},
		{give: ".5", wantErr: "both sides"},
		{give: "5.", wantErr: "both sides"},
		{give: "0.0000001", wantErr: "at most 6 decimals"},
		{give: "1e3", wantErr: "no exponent"},
		{give: "+1", wantErr: "decimal number"},
		{give: " 1", wantErr: "decimal number"},
		{give: "1,5", wantErr: "decimal number"},
		{give: "NaN", wantErr: "decimal number"},
		{give: "--1", wantErr: "decimal number"},
		{give: "1.2.3", wantErr: "decimal number"},
		{give: "9223372036854.775808", wantErr: "out of range"},
		{give: "-9223372036854.775809", wantErr: "out of range"},
		{give: "99999999999999999999", wantErr: "out of range"},
	}
	for _, tt := range tests {
		got, err := billing.ParseMoney(tt.give)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseMoney(%q) = %v", tt.give, err)
		case tt.wantErr == "" && got != tt.want:
			t.Errorf("ParseMoney(%q) = %d, want %d", tt.give, got, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseMoney(%q) = %d, %v; want an error containing %q", tt.give, got, err, tt.wantErr)
		}
	}
}

func TestMicrosString(t *testing.T) {
	tests := []struct {
		give billing.Micros
		want string
	}{
		{0, "0.00"},
		{600_000, "0.60"},
		{25 * billing.Unit, "25.00"},
		{1, "0.000001"},
		{1_230_000, "1.23"},
		{1_234_500, "1.2345"},
		{-1, "-0.000001"},
		{-1_500_000, "-1.50"},
		{math.MaxInt64, "9223372036854.775807"},
		{math.MinInt64, "-9223372036854.775808"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("Micros(%d).String() = %q, want %q", int64(tt.give), got, tt.want)
		}
	}
}

func TestMicrosJSONIsADecimalString(t *testing.T) {
	type doc struct {
		Amount billing.Micros `json:"amount"`
	}
	b, err := json.Marshal(doc{Amount: 600_000})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"amount":"0.60"}` {
		t.Errorf("json.Marshal = %s, want the amount as a string", b)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil || back.Amount != 600_000 {
		t.Errorf("json.Unmarshal(%s) = %d, %v; want 600000", b, back.Amount, err)
	}
	if err := json.Unmarshal([]byte(`{"amount":"0.1234567"}`), &back); err == nil {
		t.Error("json.Unmarshal of 7 decimals = nil error")
	}
	if err := json.Unmarshal([]byte(`{"amount":0.6}`), &back); err == nil {
		t.Error("json.Unmarshal of a number = nil error, want amounts as strings only")
	}
}

func TestMicrosAddSaturates(t *testing.T) {
	tests := []struct{ a, b, want billing.Micros }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 5, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
	}
	for _, tt := range tests {
		if got := tt.a.Add(tt.b); got != tt.want {
			t.Errorf("%d.Add(%d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzMoneyRoundTrip checks that String and ParseMoney are inverse: every
// amount prints as text that parses back to it, and every text that parses
// prints as text that parses to the same amount.
func FuzzMoneyRoundTrip(f *testing.F) {
	for _, s := range []string{"0", "0.60", "-1.5", "0.000001", "9223372036854.775807", "-9223372036854.775808", "1e3", ".5"} {
		f.Add(s, int64(len(s)))
	}
	f.Add("", int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, s string, n int64) {
		m := billing.Micros(n)
		back, err := billing.ParseMoney(m.String())
		if err != nil || back != m {
			t.Fatalf("ParseMoney(%q) = %d, %v; want %d", m.String(), back, err, n)
		}
		v, err := billing.ParseMoney(s)
		if err != nil {
			return
		}
		if again, err := billing.ParseMoney(v.String()); err != nil || again != v {
			t.Fatalf("ParseMoney(%q) = %d, but its String %q parses to %d, %v", s, v, v.String(), again, err)
		}
	})
}
