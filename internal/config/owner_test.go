package config

import (
	"strings"
	"testing"
)

func TestValidateCredentialOwner(t *testing.T) {
	checkValidate(t, []validateCase{
		{"own account", func(c *Catalog) {
			c.Credentials = append(c.Credentials, Credential{ID: "acme-own", SecretEnv: "OPENAI_KEY_1", Endpoints: []string{"openai-main"},
				Owner: Owner{Tenant: "acme"}})
		}, ""},
		{"end user's, two in one account of the same owner", func(c *Catalog) {
			c.Accounts = append(c.Accounts, Account{ID: "bob-org", QuotaScope: "account"})
			for _, id := range []string{"bob-1", "bob-2"} {
				c.Credentials = append(c.Credentials, Credential{ID: id, Account: "bob-org", SecretEnv: "OPENAI_KEY_1",
					Endpoints: []string{"openai-main"}, Owner: Owner{Tenant: "acme", User: "bob"}})
			}
		}, ""},
		{"in a platform account", func(c *Catalog) {
			c.Credentials = append(c.Credentials, Credential{ID: "acme-own", Account: "org-1", SecretEnv: "OPENAI_KEY_1",
				Endpoints: []string{"openai-main"}, Owner: Owner{Tenant: "acme"}})
		}, "credentials[2].owner: account org-1 also holds credentials[0], whose owner is the platform, not tenant acme"},
		{"platform credential in an owner's account", func(c *Catalog) {
			c.Credentials[0].Owner = Owner{Tenant: "acme"}
			c.Credentials = append(c.Credentials, Credential{ID: "plat-2", Account: "org-1", SecretEnv: "OPENAI_KEY_1", Endpoints: []string{"openai-main"}})
		}, "credentials[2].owner: account org-1 also holds credentials[0], whose owner is tenant acme, not the platform"},
		{"two owners in one account", func(c *Catalog) {
			c.Credentials[0].Owner = Owner{Tenant: "acme"}
			c.Credentials = append(c.Credentials, Credential{ID: "bob", Account: "org-1", SecretEnv: "OPENAI_KEY_1", Endpoints: []string{"openai-main"},
				Owner: Owner{Tenant: "acme", User: "bob"}})
		}, "whose owner is tenant acme, not user bob of tenant acme"},
		{"user without tenant", func(c *Catalog) { c.Credentials[1].Owner = Owner{User: "bob"} },
			"credentials[1].owner.tenant: required with owner.user"},
	})
}

func TestDecodeCredentialOwner(t *testing.T) {
	doc := strings.Replace(baseYAML, "  - {id: anthropic-k1, secret_env: ANTHROPIC_KEY_1, endpoints: [anthropic-main]}",
		"  - {id: anthropic-k1, secret_env: ANTHROPIC_KEY_1, endpoints: [anthropic-main], owner: {tenant: acme, user: bob}}", 1)
	c, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Credentials[1].Owner; got != (Owner{Tenant: "acme", User: "bob"}) {
		t.Errorf("owner = %+v", got)
	}
}
