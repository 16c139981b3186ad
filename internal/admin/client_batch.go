package admin

import (
	"context"
	"net/http"
)

// Batch applies one operation to every key b.Selector matches, or, with
// b.DryRun, answers what it would change without changing anything.
func (c *Client) Batch(ctx context.Context, b Batch) (*BatchResult, error) {
	return fetch[BatchResult](ctx, c, http.MethodPost, "/admin/keys/batch", b)
}
