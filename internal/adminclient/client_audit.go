package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"net/url"
	"strconv"
	"time"
)

// AuditQuery selects audit entries; zero fields select everything (Limit 0:
// the server's default, 100).
type AuditQuery struct {
	Since  time.Time
	Action string // e.g. "keys.disable"
	Target string // a key, account or credential ID, or "catalog"
	Limit  int
}

// Audit returns the audit entries q selects, newest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]admin.AuditEntry, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Action != "" {
		v.Set("action", q.Action)
	}
	if q.Target != "" {
		v.Set("target", q.Target)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/admin/audit"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	return fetchAll[admin.AuditEntry](ctx, c, path)
}
