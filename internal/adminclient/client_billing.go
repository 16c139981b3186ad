package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
)

// BillingAccounts returns every billing account with its balance.
func (c *Client) BillingAccounts(ctx context.Context) ([]admin.BillingAccount, error) {
	return fetchAll[admin.BillingAccount](ctx, c, "/admin/billing/accounts")
}

// BillingAccount returns the billing account with the ID, with its balance.
func (c *Client) BillingAccount(ctx context.Context, id string) (*admin.BillingAccount, error) {
	return fetch[admin.BillingAccount](ctx, c, http.MethodGet, itemPath("billing/accounts", id, ""), nil)
}

// PutBillingAccount creates the stored billing account or replaces its settings.
func (c *Client) PutBillingAccount(ctx context.Context, id string, spec admin.BillingAccountSpec) (*admin.BillingAccount, error) {
	return fetch[admin.BillingAccount](ctx, c, http.MethodPut, itemPath("billing/accounts", id, ""), spec)
}

// TopUp adds amount to the account's balance. idempotencyKey names the
// change: a retry with the same key changes nothing more ("" lets the
// server pick one, and a retry is then a second top-up).
func (c *Client) TopUp(ctx context.Context, id, idempotencyKey string, change admin.MoneyChange) (*admin.Posted, error) {
	return c.postEntry(ctx, id, "topup", idempotencyKey, change)
}

// Adjust changes the account's balance by the signed amount, for the
// reason given, idempotently by idempotencyKey as TopUp.
func (c *Client) Adjust(ctx context.Context, id, idempotencyKey string, change admin.MoneyChange) (*admin.Posted, error) {
	return c.postEntry(ctx, id, "adjust", idempotencyKey, change)
}

// Refund gives the charge of a request back to the account, once.
func (c *Client) Refund(ctx context.Context, id string, refund admin.Refund) (*admin.Posted, error) {
	return c.postEntry(ctx, id, "refund", "", refund)
}

func (c *Client) postEntry(ctx context.Context, id, action, idempotencyKey string, in any) (*admin.Posted, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if idempotencyKey != "" {
		h.Set(admin.IdempotencyHeader, idempotencyKey)
	}
	path := itemPath("billing/accounts", id, action)
	_, answer, err := c.send(ctx, http.MethodPost, path, h, body)
	if err != nil {
		return nil, err
	}
	var out admin.Posted
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, fmt.Errorf("decode POST %s: %w", path, err)
	}
	return &out, nil
}

// Statement returns the account's entries with from <= at < to (zero ends
// open), at most limit (0: the server's default).
func (c *Client) Statement(ctx context.Context, id string, from, to time.Time, limit int) (*admin.Statement, error) {
	q := url.Values{}
	setTime(q, "from", from)
	setTime(q, "to", to)
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return fetch[admin.Statement](ctx, c, http.MethodGet, withQuery(itemPath("billing/accounts", id, "statement"), q), nil)
}

// PriceQuery selects prices by kind, plan, alias and model ("" = any).
type PriceQuery struct {
	Kind, Plan, Alias, Model string
}

// Prices returns the price and cost versions q selects.
func (c *Client) Prices(ctx context.Context, q PriceQuery) ([]admin.Price, error) {
	v := url.Values{}
	for name, val := range map[string]string{"kind": q.Kind, "plan": q.Plan, "alias": q.Alias, "model": q.Model} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return fetchAll[admin.Price](ctx, c, withQuery("/admin/billing/prices", v))
}

// ApplyPrice stores a new price or cost version.
func (c *Client) ApplyPrice(ctx context.Context, spec admin.PriceSpec) (*admin.Price, error) {
	return fetch[admin.Price](ctx, c, http.MethodPost, "/admin/billing/prices", spec)
}

// SpendQuery selects billed requests for a spend report and says what to
// group them by; a zero From is the start of this UTC month.
type SpendQuery struct {
	From, To time.Time
	Account  string
	KeyID    string
	Tenant   string
	By       []ledger.Dimension
}

// Spend returns the spend report q asks for.
func (c *Client) Spend(ctx context.Context, q SpendQuery) (*admin.SpendReport, error) {
	v := url.Values{}
	setTime(v, "from", q.From)
	setTime(v, "to", q.To)
	if q.Account != "" {
		v.Set("account", q.Account)
	}
	if q.KeyID != "" {
		v.Set("key", q.KeyID)
	}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	if len(q.By) > 0 {
		by := make([]string, len(q.By))
		for i, d := range q.By {
			by[i] = string(d)
		}
		v.Set("by", strings.Join(by, ","))
	}
	return fetch[admin.SpendReport](ctx, c, http.MethodGet, withQuery("/admin/billing/spend", v), nil)
}

func setTime(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
