package adminclient

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/internal/admin"
)

// SuspendBillingAccount suspends the billing account id with reason (its
// keys get 403 billing_account_suspended on every replica within seconds)
// and returns the account.
func (c *Client) SuspendBillingAccount(ctx context.Context, id, reason string) (*admin.BillingAccount, error) {
	return fetch[admin.BillingAccount](ctx, c, http.MethodPost, itemPath("billing/accounts", id, "suspend"), admin.SuspendRequest{Reason: reason})
}

// ResumeBillingAccount lifts the billing account's suspension and returns the account.
func (c *Client) ResumeBillingAccount(ctx context.Context, id string) (*admin.BillingAccount, error) {
	return fetch[admin.BillingAccount](ctx, c, http.MethodPost, itemPath("billing/accounts", id, "resume"), nil)
}

// Tenants returns every tenant with keys, and every suspended one.
func (c *Client) Tenants(ctx context.Context) ([]admin.Tenant, error) {
	return fetchAll[admin.Tenant](ctx, c, "/admin/tenants")
}

// Tenant returns the tenant id.
func (c *Client) Tenant(ctx context.Context, id string) (*admin.Tenant, error) {
	return fetch[admin.Tenant](ctx, c, http.MethodGet, itemPath("tenants", id, ""), nil)
}

// SuspendTenant suspends the tenant id with reason (its keys get 403
// tenant_suspended) and returns it.
func (c *Client) SuspendTenant(ctx context.Context, id, reason string) (*admin.Tenant, error) {
	return fetch[admin.Tenant](ctx, c, http.MethodPost, itemPath("tenants", id, "suspend"), admin.SuspendRequest{Reason: reason})
}

// ResumeTenant lifts the tenant's suspension and returns it.
func (c *Client) ResumeTenant(ctx context.Context, id string) (*admin.Tenant, error) {
	return fetch[admin.Tenant](ctx, c, http.MethodPost, itemPath("tenants", id, "resume"), nil)
}

// SuspendAccount disables the upstream account id with reason (no new
// claims on any replica; running work finishes) and returns its state.
// SetAccount(id, "enable") or ResumeAccount resumes it.
func (c *Client) SuspendAccount(ctx context.Context, id, reason string) (*admin.AccountState, error) {
	return fetch[admin.AccountState](ctx, c, http.MethodPost, itemPath("accounts", id, "suspend"), admin.SuspendRequest{Reason: reason})
}

// ResumeAccount enables the upstream account id and returns its state.
func (c *Client) ResumeAccount(ctx context.Context, id string) (*admin.AccountState, error) {
	return fetch[admin.AccountState](ctx, c, http.MethodPost, itemPath("accounts", id, "resume"), nil)
}
