package sqldb

import "testing"

func TestRebind(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"None", "SELECT 1", "SELECT 1"},
		{"Several", "INSERT INTO t (a, b) VALUES (?, ?)", "INSERT INTO t (a, b) VALUES ($1, $2)"},
		{"InLiteral", "SELECT '?' FROM t WHERE a = ?", "SELECT '?' FROM t WHERE a = $1"},
		{"InIdentifier", `SELECT "a?" FROM t WHERE b = ? AND c = ?`, `SELECT "a?" FROM t WHERE b = $1 AND c = $2`},
		{"EscapedQuote", "SELECT 'it''s ?' WHERE a = ?", "SELECT 'it''s ?' WHERE a = $1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := postgresDialect.rebind(tt.give); got != tt.want {
				t.Errorf("rebind(%q) = %q, want %q", tt.give, got, tt.want)
			}
			if got := sqliteDialect.rebind(tt.give); got != tt.give {
				t.Errorf("sqlite rebind(%q) = %q, want it unchanged", tt.give, got)
			}
		})
	}
}
