package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// awsEnv is testEnv with an AWS access key.
var awsEnv = func() map[string]string {
	env := maps.Clone(testEnv)
	env["AWS_ID"], env["AWS_SECRET"], env["AWS_TOKEN"] = "AKIDEXAMPLE", "aws-secret-value-0001", "aws-session-token-0001"
	return env
}()

// withBedrock adds a Bedrock endpoint, a credential with AWS keys on it and
// an alias.
func withBedrock(c *Catalog) {
	c.Endpoints = append(c.Endpoints, Endpoint{ID: "bedrock", BaseURL: "https://bedrock-runtime.eu-west-3.amazonaws.com",
		Protocols: []string{"anthropic.messages"}, Bedrock: &Bedrock{}, Breaker: Breaker{Failures: 5, Open: Duration(1e9)}})
	c.Credentials = append(c.Credentials, Credential{ID: "aws-1", Endpoints: []string{"bedrock"},
		AWS: &AWSKeys{AccessKeyIDEnv: "AWS_ID", SecretAccessKeyEnv: "AWS_SECRET", SessionTokenEnv: "AWS_TOKEN"}})
}

func TestBedrockCatalog(t *testing.T) {
	c := base(t)
	withBedrock(c)
	if err := Validate(c, lookup(awsEnv)); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	ep := &c.Endpoints[len(c.Endpoints)-1]
	if h := ep.Host(); h.Cloud != sluice.CloudBedrock || h.Region != "eu-west-3" {
		t.Errorf("Host = %+v, want bedrock in the base URL's region", h)
	}
	cr := &c.Credentials[len(c.Credentials)-1]
	secret, err := cr.Secret(lookup(awsEnv))
	key, kerr := cr.AccessKey(lookup(awsEnv))
	if err != nil || kerr != nil || secret != "aws-secret-value-0001" || *key != (sluice.AWSAccessKey{AccessKeyID: "AKIDEXAMPLE", SessionToken: "aws-session-token-0001"}) {
		t.Errorf("secret %q, key %+v (%v, %v)", secret, key, err, kerr)
	}

	for name, tc := range map[string]struct {
		give func(c *Catalog)
		want string
	}{
		"no region": {func(c *Catalog) { c.Endpoints[2].BaseURL = "https://proxy.example.com" },
			"endpoints[2].bedrock.region: required"},
		"not hosted": {func(c *Catalog) { c.Endpoints[2].Protocols = []string{"openai.chat"} },
			"endpoints[2].protocols[0]: bedrock does not host openai.chat"},
		"two clouds": {func(c *Catalog) { c.Endpoints[2].Vertex = &Vertex{Project: "p", Location: "l"} },
			"endpoints[2]: set only one of azure, vertex, bedrock, code_assist and chatgpt"},
		"key and secret": {func(c *Catalog) { c.Credentials[2].SecretEnv = "OPENAI_KEY_1" },
			"credentials[2]: set only one of secret_env, secret_file, oauth and aws"},
		"no secret access key": {func(c *Catalog) { c.Credentials[2].AWS.SecretAccessKeyEnv = "" },
			"credentials[2].aws.secret_access_key_env: required"},
		"unset variable": {func(c *Catalog) { c.Credentials[2].AWS.AccessKeyIDEnv = "NOPE" },
			"credentials[2].aws.access_key_id_env: environment variable NOPE is not set"},
		"aws keys elsewhere": {func(c *Catalog) { c.Credentials[2].Endpoints = append(c.Credentials[2].Endpoints, "openai-main") },
			`credentials[2].endpoints[1]: endpoint "openai-main" is not on Bedrock`},
		"plain key on bedrock": {func(c *Catalog) { c.Credentials[0].Endpoints = append(c.Credentials[0].Endpoints, "bedrock") },
			`credentials[0].endpoints[1]: endpoint "bedrock" is on Bedrock: its credentials need aws keys`},
	} {
		c := base(t)
		withBedrock(c)
		tc.give(c)
		got := errString(Validate(c, lookup(awsEnv)))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: Validate error =\n%s\nwant it to contain\n%s", name, got, tc.want)
		}
		if strings.Contains(got, "aws-secret-value") || strings.Contains(got, "aws-session-token") {
			t.Errorf("%s: an error shows a secret: %s", name, got)
		}
	}
}
