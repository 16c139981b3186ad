package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"net/http"
)

// Batch applies one operation to every key b.Selector matches, or, with
// b.DryRun, answers what it would change without changing anything.
func (c *Client) Batch(ctx context.Context, b admin.Batch) (*admin.BatchResult, error) {
	return fetch[admin.BatchResult](ctx, c, http.MethodPost, "/admin/keys/batch", b)
}
