package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sluicehq/sluice/internal/admin"
)

// AffinityBinding returns the account a session is bound to: the session
// as a caller names it (a session header, prompt_cache_key or
// metadata.user_id) with its alias and its key's tenant, or a seed's hash.
func (c *Client) AffinityBinding(ctx context.Context, session, alias, tenant, seed string) (*admin.AffinityBinding, error) {
	v := url.Values{}
	if seed != "" {
		v.Set("seed", seed)
	} else {
		v.Set("session", session)
		v.Set("alias", alias)
		v.Set("tenant", tenant)
	}
	return fetch[admin.AffinityBinding](ctx, c, http.MethodGet, withQuery("/admin/affinity", v), nil)
}

// affinity runs "sluice affinity show (--session S --alias A [--tenant T] | --seed HASH)".
func (c *cli) affinity(args []string) error {
	if len(args) == 0 || args[0] != "show" {
		return usageError{msg: "missing or unknown affinity subcommand (show)"}
	}
	cmd := c.command("affinity show", "(--session S --alias A [--tenant T] | --seed HASH)")
	session := cmd.fs.String("session", "", "the session `ID` as the caller sends it")
	alias := cmd.fs.String("alias", "", "the `ALIAS` the session calls")
	tenant := cmd.fs.String("tenant", "", "the `TENANT` of the caller's key (empty when it has none)")
	seed := cmd.fs.String("seed", "", "a seed's `HASH`, as usage records show it")
	if _, err := cmd.parse(args[1:], 0, 0); err != nil {
		return err
	}
	if (*seed == "") == (*session == "" || *alias == "") {
		return cmd.usage("give --session and --alias, or --seed")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	b, err := cl.AffinityBinding(c.ctx, *session, *alias, *tenant, *seed)
	if err != nil {
		return err
	}
	return c.printFields(b, [][2]string{{"Seed", b.Seed}, {"Account", b.Account}, {"Expires", when(b.ExpiresAt)}})
}
