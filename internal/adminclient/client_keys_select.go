package adminclient

import (
	"context"
	"net/url"

	"github.com/sluicehq/sluice/internal/admin"
)

// SelectKeys returns the keys whose labels match selector (the grammar of
// a batch's: team=web,env!=prod).
func (c *Client) SelectKeys(ctx context.Context, selector string) ([]admin.KeyRecord, error) {
	return fetchAll[admin.KeyRecord](ctx, c, "/admin/keys?"+url.Values{"selector": {selector}}.Encode())
}
