// Package billing is the arithmetic of money: amounts in integer
// micro-units (Micros), the rates a usage is charged at (Rates), and the
// versioned prices and costs in force at a time (Table). It is pure — no
// I/O, no clock — and depends only on package sluice, so the catalog, the
// ledger stores and the request path can all share it.
package billing

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Micros is an amount of the deployment's one currency in millionths of
// its unit: "0.60" USD is 600000. Money is never a float anywhere in
// Sluice, not even in JSON, where an amount is a decimal string (see
// MarshalText).
type Micros int64

// Unit is one whole unit of the currency.
const Unit Micros = 1_000_000

// decimals is how many digits after the point an amount may have.
const decimals = 6

// MaxAmount bounds every amount an operator gives — a top-up, an
// adjustment, an allowance, a budget, an overdraft, a rate — and every
// balance a posted entry may leave: ±10^12 units. int64 micro-units reach
// about 9.2 × 10^12 units, so a few bounded amounts added together (a
// balance, its allowance and its overdraft, as admission adds them) stay
// well inside the range; sums that could still pass it (charges) are held
// at its ends (Add), never wrapped.
const MaxAmount = 1_000_000_000_000 * Unit

// CheckBound reports an amount beyond ±MaxAmount, naming the bound.
func CheckBound(m Micros) error {
	if m > MaxAmount || m < -MaxAmount {
		return fmt.Errorf("amount %s is beyond the bound of ±%s", m, MaxAmount)
	}
	return nil
}

// ParseMoney reads a decimal amount: an optional leading '-', digits, and
// optionally a point followed by 1 to 6 digits ("12", "0.60", "-1.5",
// "0.000001"). Anything else — an exponent, a '+', spaces, a seventh
// decimal, a bare point, NaN — is an error, as is an amount beyond ±9.2e12.
func ParseMoney(s string) (Micros, error) {
	digits, neg := strings.CutPrefix(s, "-")
	whole, frac, dotted := strings.Cut(digits, ".")
	switch {
	case s == "":
		return 0, errors.New("amount: empty")
	case whole == "" || dotted && frac == "":
		return 0, fmt.Errorf("amount %q: want digits on both sides of the point, like 0.60", s)
	case !allDigits(whole) || !allDigits(frac):
		return 0, fmt.Errorf("amount %q: want a decimal number like 0.60 (no sign but a leading '-', no exponent)", s)
	case len(frac) > decimals:
		return 0, fmt.Errorf("amount %q: at most %d decimals (amounts are kept in micro-units)", s, decimals)
	}
	// The magnitude is computed in uint64 so that -9223372036854.775808,
	// whose magnitude is one more than math.MaxInt64, still parses.
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > math.MaxUint64/uint64(Unit) {
		return 0, fmt.Errorf("amount %q: out of range", s)
	}
	f, _ := strconv.ParseUint(frac+strings.Repeat("0", decimals-len(frac)), 10, 64) // ≤ 6 digits: cannot fail
	mag := w*uint64(Unit) + f
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if mag > limit {
		return 0, fmt.Errorf("amount %q: out of range", s)
	}
	if neg {
		return Micros(-mag), nil // two's complement: also right for the most negative amount
	}
	return Micros(mag), nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String is the amount as a decimal with at least 2 and at most 6
// decimals: "0.60", "25.00", "-0.000001". ParseMoney reads it back exactly.
func (m Micros) String() string {
	mag := uint64(m)
	if m < 0 {
		mag = -mag // two's complement: also right for the most negative amount
	}
	frac := strconv.FormatUint(mag%uint64(Unit)+uint64(Unit), 10)[1:] // 6 digits, leading zeros kept
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := strconv.FormatUint(mag/uint64(Unit), 10) + "." + frac
	if m < 0 {
		return "-" + s
	}
	return s
}

// MarshalText renders the amount as String does, so JSON carries it as a
// decimal string, never a number.
func (m Micros) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads an amount with ParseMoney.
func (m *Micros) UnmarshalText(b []byte) error {
	v, err := ParseMoney(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Add is a + b, held at the largest or smallest amount instead of wrapping
// around.
func (m Micros) Add(b Micros) Micros {
	s := m + b
	switch {
	case b > 0 && s < m:
		return math.MaxInt64
	case b < 0 && s > m:
		return math.MinInt64
	}
	return s
}
