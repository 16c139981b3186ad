package sqlledger

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/ledger"
)

// An execution's expected accounts are one column, the IDs joined by ",":
// account IDs are letters, digits, '.', '_' and '-' only, and a single
// account, the usual case, is stored without building a string.
const accountSep = ","

func joinAccounts(ids []string) string { return strings.Join(ids, accountSep) }

// splitAccounts reverses joinAccounts; "" is no accounts (nil).
func splitAccounts(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, accountSep)
}

// CountExecutions groups the executions of the records f selects in the
// database, so only one row per group comes back, however many requests
// the range holds.
func (s *Store) CountExecutions(ctx context.Context, f ledger.PolicyFilter) ([]ledger.PolicyCount, error) {
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.From.IsZero() {
		from = f.From.UnixMicro()
	}
	if !f.To.IsZero() {
		to = f.To.UnixMicro()
	}
	where, args := `u.started_at >= ? AND u.started_at < ?`, []any{from, to}
	if f.KeyID != "" {
		where, args = where+` AND u.key_id = ?`, append(args, f.KeyID)
	}
	rows, err := s.db.Query(ctx, `SELECT u.key_id, e.account_id, e.credential_id, e.expected, e.fallback, COUNT(*)
		FROM executions e JOIN usage_records u ON u.request_id = e.request_id
		WHERE `+where+`
		GROUP BY u.key_id, e.account_id, e.credential_id, e.expected, e.fallback`, args...)
	if err != nil {
		return nil, fmt.Errorf("count executions: %w", err)
	}
	defer rows.Close()
	var out []ledger.PolicyCount
	for rows.Next() {
		var (
			c        ledger.PolicyCount
			expected string
		)
		if err := rows.Scan(&c.KeyID, &c.AccountID, &c.CredentialID, &expected, &c.Fallback, &c.Executions); err != nil {
			return nil, fmt.Errorf("count executions: %w", err)
		}
		c.Expected = splitAccounts(expected)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count executions: %w", err)
	}
	// Sorted here rather than by ORDER BY: these TEXT columns sort by the
	// database's collation, and the order must be Go's on every store.
	slices.SortFunc(out, ledger.ComparePolicyCounts)
	return out, nil
}
