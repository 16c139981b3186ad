package config

import "fmt"

// owners checks the owners of BYOK credentials: an owner is a tenant, and
// optionally an end user of it; and an account's credentials all have the
// same owner (or none), since an account's limits and cooldowns are shared
// by its credentials — an owner's key in a platform account would be
// slowed by, and cool, the platform's work, and the other way round.
func (v *validator) owners() {
	owners := map[string]Owner{} // account → owner of its first credential
	first := map[string]int{}    // account → index of that credential
	for i := range v.c.Credentials {
		cr := &v.c.Credentials[i]
		at := fmt.Sprintf("credentials[%d].owner", i)
		if cr.Owner.User != "" && cr.Owner.Tenant == "" {
			v.addf(at+".tenant", "required with owner.user: an end user is one of a tenant's")
		}
		account := cr.Account
		if account == "" {
			account = cr.ID // a credential without an account is its own account
		}
		o, seen := owners[account]
		if !seen {
			owners[account], first[account] = cr.Owner, i
			continue
		}
		if o != cr.Owner {
			v.addf(at, "account %s also holds credentials[%d], whose owner is %s, not %s: an owned credential needs an account of its own owner (or none: it is then its own account)",
				account, first[account], o, cr.Owner)
		}
	}
}

// String names the owner for messages: "tenant acme", "user u1 of tenant
// acme", or "the platform" for none.
func (o Owner) String() string {
	switch {
	case o == Owner{}:
		return "the platform"
	case o.User != "":
		return "user " + o.User + " of tenant " + o.Tenant
	}
	return "tenant " + o.Tenant
}
