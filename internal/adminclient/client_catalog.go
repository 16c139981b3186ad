package adminclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicehq/sluice/internal/admin"
)

// CatalogVersions returns up to limit stored catalog versions, newest first
// (limit 0: the server's default, 100).
func (c *Client) CatalogVersions(ctx context.Context, limit int) ([]admin.CatalogVersion, error) {
	path := "/admin/catalog/versions"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	return fetchAll[admin.CatalogVersion](ctx, c, path)
}

// CatalogVersionDoc returns the YAML of a stored catalog version, its
// passwords redacted.
func (c *Client) CatalogVersionDoc(ctx context.Context, version int64) ([]byte, error) {
	_, body, err := c.send(ctx, http.MethodGet, versionPath(version, ""), nil, nil)
	return body, err
}

// CatalogDiff returns the unified diff from stored catalog version from (0:
// nothing) to version to, its passwords redacted; "" when they are equal.
func (c *Client) CatalogDiff(ctx context.Context, from, to int64) (string, error) {
	_, body, err := c.send(ctx, http.MethodGet, versionPath(to, "diff")+"?"+url.Values{"from": {strconv.FormatInt(from, 10)}}.Encode(), nil, nil)
	return string(body), err
}

// RollbackCatalog stores the document of a stored catalog version as a new
// version and makes it serve; it fails as ApplyCatalog does.
func (c *Client) RollbackCatalog(ctx context.Context, version int64) (*admin.CatalogStatus, error) {
	return fetch[admin.CatalogStatus](ctx, c, http.MethodPost, versionPath(version, "rollback"), nil)
}

// versionPath is the path of a stored catalog version, or of its action.
func versionPath(version int64, action string) string {
	p := "/admin/catalog/versions/" + strconv.FormatInt(version, 10)
	if action != "" {
		p += "/" + action
	}
	return p
}
