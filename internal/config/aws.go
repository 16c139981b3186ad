package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"

	"github.com/sluicehq/sluice"
)

// Bedrock puts an endpoint on AWS Bedrock's runtime: its base URL is the
// region's (https://bedrock-runtime.{region}.amazonaws.com), its models are
// Bedrock model IDs or inference profiles (anthropic.claude-…-v1:0,
// us.anthropic.…), and its requests are signed for the region with the
// AWS keys of its credentials (Credential.AWS). It hosts Anthropic's
// models (anthropic.messages).
type Bedrock struct {
	// Region is the AWS region requests are signed for; default: the one
	// in a base URL of the form above.
	Region string `yaml:"region"`
}

// AWSKeys are an AWS access key, for a credential of a Bedrock endpoint:
// each part from an environment variable or a file (one of the two; the
// session token, of temporary credentials, may be absent).
type AWSKeys struct {
	AccessKeyIDEnv      string `yaml:"access_key_id_env"`
	AccessKeyIDFile     string `yaml:"access_key_id_file"`
	SecretAccessKeyEnv  string `yaml:"secret_access_key_env"`
	SecretAccessKeyFile string `yaml:"secret_access_key_file"`
	SessionTokenEnv     string `yaml:"session_token_env"`
	SessionTokenFile    string `yaml:"session_token_file"`
}

// bedrockHost is the host of Bedrock's runtime in a region.
var bedrockHost = regexp.MustCompile(`^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// region is the endpoint's region: as configured, else the one its base
// URL's host names; "" when neither says.
func (b *Bedrock) region(baseURL string) string {
	if b.Region != "" {
		return b.Region
	}
	if u, err := url.Parse(baseURL); err == nil {
		if m := bedrockHost.FindStringSubmatch(u.Hostname()); m != nil {
			return m[1]
		}
	}
	return ""
}

// AccessKey returns the credential's AWS access key ID and session token
// ("" when it has none); nil for a credential without AWS keys. Errors name
// the variable or file, never the value.
func (c *Credential) AccessKey(lookupEnv func(string) (string, bool)) (*sluice.AWSAccessKey, error) {
	if c.AWS == nil {
		return nil, nil
	}
	id, err := readPart("access_key_id", c.AWS.AccessKeyIDEnv, c.AWS.AccessKeyIDFile, lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("credential %q: aws: %w", c.ID, err)
	}
	k := &sluice.AWSAccessKey{AccessKeyID: id}
	if c.AWS.SessionTokenEnv != "" || c.AWS.SessionTokenFile != "" {
		if k.SessionToken, err = readPart("session_token", c.AWS.SessionTokenEnv, c.AWS.SessionTokenFile, lookupEnv); err != nil {
			return nil, fmt.Errorf("credential %q: aws: %w", c.ID, err)
		}
	}
	return k, nil
}

// secretAccessKey reads the AWS keys' secret access key.
func (k *AWSKeys) secretAccessKey(lookupEnv func(string) (string, bool)) (string, error) {
	return readPart("secret_access_key", k.SecretAccessKeyEnv, k.SecretAccessKeyFile, lookupEnv)
}

// readPart reads the part of AWS keys named name from the environment
// variable env or the file file, exactly one of them.
func readPart(name, env, file string, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case env != "" && file != "":
		return "", &fieldError{field: name + "_env", msg: "set only one of " + name + "_env and " + name + "_file"}
	case env != "":
		return readEnv(name+"_env", env, lookupEnv)
	case file != "":
		return readSecretFile(name+"_file", file)
	}
	return "", &fieldError{field: name + "_env", msg: "required (or " + name + "_file)"}
}

// awsCredential checks a credential with AWS keys: no other secret, every
// part readable, and only Bedrock endpoints (whose requests it signs).
func (v *validator) awsCredential(at string, cr *Credential) {
	if cr.SecretEnv != "" || cr.SecretFile != "" || cr.OAuth.Set() {
		v.addf(at, "set only one of secret_env, secret_file, oauth and aws")
	}
	if _, err := cr.Secret(v.lookupEnv); err != nil {
		v.secret(at+".aws", err)
	}
	if _, err := cr.AccessKey(v.lookupEnv); err != nil {
		v.secret(at+".aws", err)
	}
	for j, id := range cr.Endpoints {
		if e := v.endpointByID[id]; e != nil && e.Bedrock == nil {
			v.addf(fmt.Sprintf("%s.endpoints[%d]", at, j), "endpoint %q is not on Bedrock: AWS keys sign only Bedrock's requests", id)
		}
	}
}

// bedrockCredentials checks that a credential of a Bedrock endpoint has
// AWS keys: nothing else can sign its requests.
func (v *validator) bedrockCredentials(at string, cr *Credential) {
	if cr.AWS != nil {
		return
	}
	for j, id := range cr.Endpoints {
		if e := v.endpointByID[id]; e != nil && e.Bedrock != nil {
			v.addf(fmt.Sprintf("%s.endpoints[%d]", at, j), "endpoint %q is on Bedrock: its credentials need aws keys (access_key_id_env, secret_access_key_env)", id)
		}
	}
}

// bedrock checks an endpoint's bedrock block: a region it names or its base
// URL gives, and only the protocols Bedrock hosts.
func (v *validator) bedrock(at string, e *Endpoint) {
	switch region := e.Bedrock.region(e.BaseURL); {
	case region == "":
		v.addf(at+".bedrock.region", "required: the base URL is not https://bedrock-runtime.{region}.amazonaws.com")
	case !cloudName.MatchString(region):
		v.addf(at+".bedrock.region", "must be letters, digits, '.', '_' or '-'")
	}
	hosted := sluice.CloudProtocols[sluice.CloudBedrock]
	for j, p := range e.Protocols {
		if sluice.Protocol(p).Known() && !slices.Contains(hosted, sluice.Protocol(p)) {
			v.addf(fmt.Sprintf("%s.protocols[%d]", at, j), "bedrock does not host %s (it hosts %v)", p, hosted)
		}
	}
}
