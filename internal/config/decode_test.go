package config

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// decodeTests is shared with FuzzDecode as its seed corpus.
var decodeTests = []struct {
	name string
	give string
	want string
}{
	{
		name: "UnknownTopLevelField",
		give: "version: 1\nverison: 2\n",
		want: `line 2: unknown field "verison" (did you mean "version"?)`,
	},
	{
		name: "UnknownFieldInEndpoint",
		give: "version: 1\nendpoints:\n  - id: openai-main\n    bse_url: https://api.openai.com\n",
		want: `line 4: unknown field "bse_url" in endpoints[0] (did you mean "base_url"?)`,
	},
	{
		name: "UnknownFieldInDeploymentListItem",
		give: "models:\n  - alias: fast\n    deployments:\n      - model: gpt-4o-mini\n      - {model: gpt-4o, wieght: 2}\n",
		want: `line 5: unknown field "wieght" in models[0].deployments[1] (did you mean "weight"?)`,
	},
	{
		name: "UnknownFieldWithoutSuggestion",
		give: "server:\n  tls: true\n",
		want: `line 2: unknown field "tls" in server`,
	},
	{
		name: "UnknownFieldInMergedAnchor",
		give: "endpoints:\n  - &e {id: a, bse_url: x}\n  - <<: *e\n    id: b\n",
		want: `line 2: unknown field "bse_url" in endpoints[0] (did you mean "base_url"?)`,
	},
	{
		name: "DurationWithoutUnit",
		give: "server:\n  timeouts: {idle: 30}\n",
		want: `line 2: server.timeouts.idle: invalid duration "30" (want e.g. "30s")`,
	},
	{
		name: "NegativeDuration",
		give: "endpoints:\n  - id: a\n    breaker:\n      open: -5s\n",
		want: `line 4: endpoints[0].breaker.open: duration "-5s" must not be negative`,
	},
	{
		name: "KeyPolicyWaitWithoutUnit",
		give: "keys:\n  - id: a\n    policy: {mode: preferred, wait: 30}\n    limits: {rpm: lots}\n",
		want: `line 3: keys[0].policy.wait: invalid duration "30" (want e.g. "30s")` + "\n" +
			`line 4: keys[0].limits.rpm: want an integer, got "lots"`,
	},
	{
		name: "KeyPolicyWaitAsList",
		give: "keys:\n  - id: a\n    policy: {wait: [1s]}\n",
		want: `line 3: keys[0].policy.wait: want a duration such as "30s"`,
	},
	{
		name: "DurationAsList",
		give: "accounts:\n  - cooldown: {base: [1s]}\n",
		want: `line 2: accounts[0].cooldown.base: want a duration such as "30s"`,
	},
	{
		name: "RetentionInHours",
		give: "database:\n  retention: {usage: 36h}\n",
		want: `line 2: database.retention.usage: invalid number of days "36h" (want whole days such as "90d"; "0" keeps forever)`,
	},
	{
		name: "RetentionWithoutUnit",
		give: "database:\n  retention:\n    audit: 400\n",
		want: `line 3: database.retention.audit: invalid number of days "400" (want whole days such as "90d"; "0" keeps forever)`,
	},
	{
		name: "RetentionNegative",
		give: "database:\n  retention: {usage: -1d}\n",
		want: `line 2: database.retention.usage: "-1d": want 0 to 36500d`,
	},
	{
		name: "StringForInteger",
		give: "server:\n  max_body_bytes: lots\n",
		want: `line 2: server.max_body_bytes: want an integer, got "lots"`,
	},
	{
		name: "IntegerOverflow",
		give: "keys:\n  - limits: {rpm: 99999999999999999999999}\n",
		want: `line 2: keys[0].limits.rpm: want an integer, got "99999999999999999999999"`,
	},
	{
		name: "MappingForList",
		give: "endpoints: {id: a}\n",
		want: `line 1: endpoints: want a list, got a mapping`,
	},
	{
		name: "ScalarForList",
		give: "endpoints:\n  - id: a\n    protocols: openai.chat\n",
		want: `line 3: endpoints[0].protocols: want a list, got "openai.chat"`,
	},
	{
		name: "ScalarForMapping",
		give: "server: fast\n",
		want: `line 1: server: want a mapping, got "fast"`,
	},
	{
		name: "ListForString",
		give: "credentials:\n  - id: [a]\n",
		want: `line 2: credentials[0].id: want a string, got a list`,
	},
	{
		name: "DuplicateField",
		give: "version: 1\nstate: {backend: memory}\nversion: 1\n",
		want: `line 3: duplicate field "version" (first set at line 1)`,
	},
	{
		name: "Empty",
		give: "",
		want: "catalog is empty",
	},
	{
		name: "OnlyComments",
		give: "# nothing yet\n",
		want: "catalog is empty",
	},
	{
		name: "EmptyDocument",
		give: "---\n",
		want: "catalog is empty",
	},
	{
		name: "MultipleDocuments",
		give: "version: 1\n---\nversion: 1\n",
		want: "line 2: catalog must be a single YAML document",
	},
	{
		name: "NotAMapping",
		give: "- version: 1\n",
		want: "line 1: catalog must be a mapping, got a list",
	},
	{
		name: "Syntax",
		give: "version: 1\nversion 2\nstate: {}\n",
		want: "line 2: could not find expected ':'",
	},
	{
		name: "EveryProblemInLineOrder",
		give: "version: one\nserver:\n  listen: [a]\n  timeouts: {connect: 5}\nendpoints:\n  - id: a\n    bse_url: x\n",
		want: `line 1: version: want an integer, got "one"` + "\n" +
			`line 3: server.listen: want a string, got a list` + "\n" +
			`line 4: server.timeouts.connect: invalid duration "5" (want e.g. "30s")` + "\n" +
			`line 7: unknown field "bse_url" in endpoints[0] (did you mean "base_url"?)`,
	},
	{
		// yaml.v3 panics on these (it hashes every key beside a merge); the
		// fuzzer found it.
		name: "MappingKeyBesideMerge",
		give: "models:\n- {<<: {}, ? {a: 1} : 2}\n",
		want: "line 2: models[0]: field names must be plain strings, got a mapping",
	},
	{
		name: "ListKeyBesideTopLevelMerge",
		give: "<<: {}\n? [a]\n: 2\n",
		want: "line 2: catalog: field names must be plain strings, got a list",
	},
}

func TestDecodeErrors(t *testing.T) {
	for _, tt := range decodeTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.give))
			if got := errString(err); got != tt.want {
				t.Errorf("Decode error =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestDecodeFlowAndBlockAgree(t *testing.T) {
	block := "version: 1\nmodels:\n  - alias: fast\n    deployments:\n      - model: gpt-4o-mini\n        endpoints: [openai-main]\n        weight: 2\n"
	flow := "{version: 1, models: [{alias: fast, deployments: [{model: gpt-4o-mini, endpoints: [openai-main], weight: 2}]}]}"
	a, err := Decode([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode([]byte(flow))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("block and flow differ (-block +flow):\n%s", diff)
	}
}

func FuzzDecode(f *testing.F) {
	for _, tt := range decodeTests {
		f.Add([]byte(tt.give))
	}
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal(Decode(data)) error: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Marshal(c)) error: %v\n%s", err, out)
		}
		if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the catalog (-first +second):\n%s", diff)
		}
		// Whatever decodes must survive the rest of Load. Secret files are
		// dropped: a fuzzed path could name a device that never ends.
		for i := range c.Credentials {
			c.Credentials[i].SecretFile = ""
		}
		for i := range c.Keys {
			c.Keys[i].SecretFile = ""
		}
		ApplyDefaults(c)
		_ = Validate(c, func(string) (string, bool) { return "", false })
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
