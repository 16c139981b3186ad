package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"net/http"
	"net/url"
)

// Entitlements lists the entitlements the filter selects (empty fields
// select all), ordered by tenant then user.
func (c *Client) Entitlements(ctx context.Context, tenant, user, profile string) ([]admin.Entitlement, error) {
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
	out, err := fetch[[]admin.Entitlement](ctx, c, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// PutEntitlements sets entitlements in bulk, all or none (see
// EntitlementsPut).
func (c *Client) PutEntitlements(ctx context.Context, body admin.EntitlementsPut) (*admin.EntitlementsResult, error) {
	return fetch[admin.EntitlementsResult](ctx, c, http.MethodPut, "/admin/entitlements", body)
}

// DeleteEntitlements removes end users' entitlements in bulk.
func (c *Client) DeleteEntitlements(ctx context.Context, body admin.EntitlementsDelete) (*admin.EntitlementsResult, error) {
	return fetch[admin.EntitlementsResult](ctx, c, http.MethodDelete, "/admin/entitlements", body)
}

// Profiles lists the serving catalog's quota profiles.
func (c *Client) Profiles(ctx context.Context) ([]admin.Profile, error) {
	out, err := fetch[[]admin.Profile](ctx, c, http.MethodGet, "/admin/profiles", nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}
