package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// maxAnswer bounds how much of an admin answer the client reads.
const maxAnswer = 64 << 20

// APIError is an error answer of the admin API.
type APIError struct {
	Status  int    // HTTP status
	Code    string // stable code, e.g. "not_found", "key_transition_invalid"
	Message string // may span several lines (catalog validation problems)
}

// Error returns "message (code, HTTP status)".
func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// Client calls the admin API. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// NewClient returns a client of the admin API at baseURL (for example
// "http://127.0.0.1:8081") that presents token.
func NewClient(baseURL, token string) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{Timeout: time.Minute}}
}

// CreateKey creates a virtual key. The answer holds its plaintext, which
// the server never shows again.
func (c *Client) CreateKey(ctx context.Context, spec admin.KeySpec) (*admin.IssuedKey, error) {
	return fetch[admin.IssuedKey](ctx, c, http.MethodPost, "/admin/keys", spec)
}

// ListKeys returns every stored key.
func (c *Client) ListKeys(ctx context.Context) ([]admin.KeyRecord, error) {
	return fetchAll[admin.KeyRecord](ctx, c, "/admin/keys")
}

// KeysPage returns up to limit keys in ListKeys' order after the key ID
// after ("" = from the first) — of those whose labels match selector,
// unless it is "" — how many there are in all, and the after of the next
// page ("" when none follows).
func (c *Client) KeysPage(ctx context.Context, selector, after string, limit int) (keys []admin.KeyRecord, total int, next string, err error) {
	v := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		v.Set("after", after)
	}
	if selector != "" {
		v.Set("selector", selector)
	}
	path := withQuery("/admin/keys", v)
	resp, body, err := c.send(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, 0, "", err
	}
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil, 0, "", fmt.Errorf("decode GET %s: %w", path, err)
	}
	if total, err = strconv.Atoi(resp.Header.Get(admin.TotalCountHeader)); err != nil {
		return nil, 0, "", fmt.Errorf("GET %s: %s: %w", path, admin.TotalCountHeader, err)
	}
	return keys, total, resp.Header.Get(admin.NextAfterHeader), nil
}

// Key returns the key with the ID.
func (c *Client) Key(ctx context.Context, id string) (*admin.KeyRecord, error) {
	return fetch[admin.KeyRecord](ctx, c, http.MethodGet, itemPath("keys", id, ""), nil)
}

// Disable stops the key from authenticating until it is enabled.
func (c *Client) Disable(ctx context.Context, id string) (*admin.KeyRecord, error) {
	return c.keyAction(ctx, id, "disable", nil)
}

// Enable makes a disabled or pending key active.
func (c *Client) Enable(ctx context.Context, id string) (*admin.KeyRecord, error) {
	return c.keyAction(ctx, id, "enable", nil)
}

// Revoke ends the key for good.
func (c *Client) Revoke(ctx context.Context, id string) (*admin.KeyRecord, error) {
	return c.keyAction(ctx, id, "revoke", nil)
}

// Expire sets when the key stops working (see Expiry; the zero Expiry means now).
func (c *Client) Expire(ctx context.Context, id string, e admin.Expiry) (*admin.KeyRecord, error) {
	return c.keyAction(ctx, id, "expire", e)
}

// Rotate gives the key a new plaintext, returned this once; the old one
// stops working at once.
func (c *Client) Rotate(ctx context.Context, id string) (*admin.IssuedKey, error) {
	return fetch[admin.IssuedKey](ctx, c, http.MethodPost, itemPath("keys", id, "rotate"), nil)
}

// UpdateKey changes the fields of key id that c holds.
func (c *Client) UpdateKey(ctx context.Context, id string, change admin.KeyChange) (*admin.KeyRecord, error) {
	return fetch[admin.KeyRecord](ctx, c, http.MethodPatch, itemPath("keys", id, ""), change)
}

// SetModels replaces the aliases the key may use; empty allows all.
func (c *Client) SetModels(ctx context.Context, id string, models []string) (*admin.KeyRecord, error) {
	if models == nil {
		models = []string{}
	}
	return fetch[admin.KeyRecord](ctx, c, http.MethodPut, itemPath("keys", id, "models"), admin.ModelsBody{Models: &models})
}

// Status returns the serving catalog's status and key counts.
func (c *Client) Status(ctx context.Context) (*admin.Status, error) {
	return fetch[admin.Status](ctx, c, http.MethodGet, "/admin/status", nil)
}

// Catalog returns the YAML serving now and its version.
func (c *Client) Catalog(ctx context.Context) (doc []byte, version int64, err error) {
	resp, body, err := c.send(ctx, http.MethodGet, "/admin/catalog", nil, nil)
	if err != nil {
		return nil, 0, err
	}
	version, err = strconv.ParseInt(strings.Trim(resp.Header.Get("ETag"), `"`), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("catalog ETag %q: %w", resp.Header.Get("ETag"), err)
	}
	return body, version, nil
}

// ApplyCatalog makes doc the serving catalog. ifVersion is the version the
// caller last saw (0 = no check); a stale one fails with status 412. A
// catalog without models or keys replaces one that has them only with
// force (409 catalog_emptied without).
func (c *Client) ApplyCatalog(ctx context.Context, doc []byte, ifVersion int64, force bool) (*admin.CatalogStatus, error) {
	h := http.Header{"Content-Type": {"text/yaml"}}
	if ifVersion > 0 {
		h.Set("If-Match", admin.ETag(ifVersion))
	}
	path := "/admin/catalog"
	if force {
		path += "?force=true"
	}
	_, body, err := c.send(ctx, http.MethodPut, path, h, doc)
	if err != nil {
		return nil, err
	}
	var out admin.CatalogStatus
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decode catalog status: %w", err)
	}
	return &out, nil
}

// Usage returns the usage records q selects, oldest first.
func (c *Client) Usage(ctx context.Context, q ledger.UsageFilter) ([]admin.UsageRecord, error) {
	return fetchAll[admin.UsageRecord](ctx, c, withQuery("/admin/usage", admin.UsageValues(q)))
}

// UsageCSV writes the usage records q selects to w as CSV (see
// admin.UsageCSVColumns).
func (c *Client) UsageCSV(ctx context.Context, q ledger.UsageFilter, w io.Writer) error {
	v := admin.UsageValues(q)
	v.Set("format", "csv")
	_, body, err := c.send(ctx, http.MethodGet, withQuery("/admin/usage", v), nil, nil)
	if err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// UsageSummary returns what the usage records q selects add up to, by
// bucket ("" lets the server choose by the window).
func (c *Client) UsageSummary(ctx context.Context, q ledger.UsageFilter, bucket ledger.Bucket) (*admin.UsageSummary, error) {
	v := admin.UsageValues(q)
	v.Del("limit")
	if bucket != "" {
		v.Set("bucket", string(bucket))
	}
	return fetch[admin.UsageSummary](ctx, c, http.MethodGet, withQuery("/admin/usage/summary", v), nil)
}

// Accounts returns the state of every upstream account.
func (c *Client) Accounts(ctx context.Context) ([]admin.AccountState, error) {
	return fetchAll[admin.AccountState](ctx, c, "/admin/accounts")
}

// Account returns the state of the account with the ID.
func (c *Client) Account(ctx context.Context, id string) (*admin.AccountState, error) {
	return fetch[admin.AccountState](ctx, c, http.MethodGet, itemPath("accounts", id, ""), nil)
}

// SetAccount applies "disable" or "enable" to the account and returns its
// new state. enable also re-enables an account a billing failure disabled.
func (c *Client) SetAccount(ctx context.Context, id, action string) (*admin.AccountState, error) {
	return fetch[admin.AccountState](ctx, c, http.MethodPost, itemPath("accounts", id, action), nil)
}

// Credentials returns the state of every upstream credential.
func (c *Client) Credentials(ctx context.Context) ([]admin.CredentialState, error) {
	return fetchAll[admin.CredentialState](ctx, c, "/admin/credentials")
}

// Credential returns the state of the credential with the ID.
func (c *Client) Credential(ctx context.Context, id string) (*admin.CredentialState, error) {
	return fetch[admin.CredentialState](ctx, c, http.MethodGet, itemPath("credentials", id, ""), nil)
}

// SetCredential applies "disable", "drain", "enable" or "remove" to the
// credential and returns its new state. A remove while the credential holds
// claims fails with status 409 (credential_claims_held) unless it is
// draining and force is set, which drops the work running on it. Only
// remove looks at force.
func (c *Client) SetCredential(ctx context.Context, id, action string, force bool) (*admin.CredentialState, error) {
	var in any
	if force {
		in = admin.Removal{Force: true}
	}
	return fetch[admin.CredentialState](ctx, c, http.MethodPost, itemPath("credentials", id, action), in)
}

// itemPath is the path of one key, account or credential ("keys",
// "accounts", "credentials"), or of an action on it.
func itemPath(kind, id, action string) string {
	p := "/admin/" + kind + "/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

func (c *Client) keyAction(ctx context.Context, id, action string, in any) (*admin.KeyRecord, error) {
	return fetch[admin.KeyRecord](ctx, c, http.MethodPost, itemPath("keys", id, action), in)
}

// fetch calls the route and decodes its answer as a T.
func fetch[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	out := new(T)
	if err := c.call(ctx, method, path, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fetchAll calls the GET route of a list and returns its items.
func fetchAll[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	out, err := fetch[[]T](ctx, c, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// call sends in as JSON (nil: no body) and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	var h http.Header
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		h = http.Header{"Content-Type": {"application/json"}}
	}
	_, answer, err := c.send(ctx, method, path, h, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// send makes one request. An error answer comes back as *APIError.
func (c *Client) send(ctx context.Context, method, path string, h http.Header, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		return nil, nil, apiError(resp, answer)
	}
	return resp, answer, nil
}

// apiError reads an error answer, in the envelope or not.
func apiError(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	var env admin.ErrorEnvelope
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message = string(env.Error.Code), env.Error.Message
		return e
	}
	e.Code = string(sluice.CodeInternal)
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 512 {
		e.Message = e.Message[:512] + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
