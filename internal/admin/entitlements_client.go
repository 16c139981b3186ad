package admin

import (
	"context"
	"net/http"
	"net/url"
)

// Entitlements lists the entitlements the filter selects (empty fields
// select all), ordered by tenant then user.
func (c *Client) Entitlements(ctx context.Context, tenant, user, profile string) ([]Entitlement, error) {
	q := url.Values{}
	for name, v := range map[string]string{"tenant": tenant, "user": user, "profile": profile} {
		if v != "" {
			q.Set(name, v)
		}
	}
	path := "/admin/entitlements"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	out, err := fetch[[]Entitlement](ctx, c, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// PutEntitlements sets entitlements in bulk, all or none (see
// EntitlementsPut).
func (c *Client) PutEntitlements(ctx context.Context, body EntitlementsPut) (*EntitlementsResult, error) {
	return fetch[EntitlementsResult](ctx, c, http.MethodPut, "/admin/entitlements", body)
}

// DeleteEntitlements removes end users' entitlements in bulk.
func (c *Client) DeleteEntitlements(ctx context.Context, body EntitlementsDelete) (*EntitlementsResult, error) {
	return fetch[EntitlementsResult](ctx, c, http.MethodDelete, "/admin/entitlements", body)
}
