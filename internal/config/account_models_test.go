package config

import (
	"strings"
	"testing"
)

func TestValidateAccountModels(t *testing.T) {
	checkValidate(t, []validateCase{
		{"AnyModelWhenACredentialServesAny", func(c *Catalog) {
			c.Accounts[0].Models = map[string]AccountModel{"gpt-4o-mini": {MaxInflight: 1, RPM: 60, TPM: 1000}}
		}, ""},
		{"ModelNoDeploymentUses", func(c *Catalog) {
			c.Accounts[0].Models = map[string]AccountModel{"o3": {}}
		}, `accounts[0].models.o3: no deployment of model "o3" runs on a credential of account "org-1"`},
		{"ModelOfTheCredentials", func(c *Catalog) {
			c.Credentials[0].Models = []string{"gpt-4o-mini"}
			c.Accounts[0].Models = map[string]AccountModel{"gpt-4o-mini": {MaxInflight: 1}}
		}, ""},
		{"ModelNoCredentialServes", func(c *Catalog) {
			c.Credentials[0].Models = []string{"gpt-4o-mini"}
			c.Accounts[0].Models = map[string]AccountModel{"qwen-plus": {MaxInflight: 1}}
		}, `accounts[0].models.qwen-plus: no deployment of model "qwen-plus" runs on a credential of account "org-1"`},
		{"CredentialScope", func(c *Catalog) {
			c.Accounts[0].QuotaScope = "credential"
			c.Accounts[0].Models = map[string]AccountModel{"gpt-4o-mini": {}}
		}, "accounts[0].models.gpt-4o-mini: per-model units are an account's quotas"},
		{"NegativeLimit", func(c *Catalog) {
			c.Accounts[0].Models = map[string]AccountModel{"gpt-4o-mini": {TPM: -1}}
		}, "accounts[0].models.gpt-4o-mini.tpm: must be >= 0"},
	})
}

func TestDecodeAccountModels(t *testing.T) {
	c, err := Decode([]byte(strings.Replace(baseYAML, "  - {id: org-1, cooldown: {base: 2s, max: 30s}}",
		"  - {id: org-1, cooldown: {base: 2s, max: 30s}, models: {gpt-4o-mini: {max_inflight: 2, rpm: 60, tpm: 100000}}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Accounts[0].Models["gpt-4o-mini"], (AccountModel{MaxInflight: 2, RPM: 60, TPM: 100000}); got != want {
		t.Errorf("models.gpt-4o-mini = %+v, want %+v", got, want)
	}
	if _, err := Decode([]byte(strings.Replace(baseYAML, "cooldown: {base: 2s, max: 30s}}", "cooldown: {base: 2s, max: 30s}, models: {m: {burst: 1}}}", 1))); err == nil {
		t.Error("an unknown field of accounts[].models.<m> was accepted")
	}
}
