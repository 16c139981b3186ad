package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PolicyReport returns, for each key (or only keyID, when not empty), its
// executions over [from, to) against what its policy expected. A zero to is
// the server's now, a zero from a day before to.
func (c *Client) PolicyReport(ctx context.Context, keyID string, from, to time.Time) (*admin.PolicyReport, error) {
	q := url.Values{}
	if keyID != "" {
		q.Set("key", keyID)
	}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339Nano))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339Nano))
	}
	path := "/admin/usage/policy"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return fetch[admin.PolicyReport](ctx, c, http.MethodGet, path, nil)
}

// CacheReport returns the cache report q asks for.
func (c *Client) CacheReport(ctx context.Context, q admin.CacheQuery) (*admin.CacheReport, error) {
	v := url.Values{}
	setTime(v, "from", q.From)
	setTime(v, "to", q.To)
	if len(q.By) > 0 {
		by := make([]string, len(q.By))
		for i, d := range q.By {
			by[i] = string(d)
		}
		v.Set("by", strings.Join(by, ","))
	}
	return fetch[admin.CacheReport](ctx, c, http.MethodGet, withQuery("/admin/usage/cache", v), nil)
}
