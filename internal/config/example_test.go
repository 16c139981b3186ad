package config_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
)

// A minimal catalog: one endpoint, one credential, one alias. Everything
// else takes its default. testdata/full.yaml sets every field.
func ExampleLoad() {
	catalog := []byte(`
version: 1
endpoints:
  - id: openai-main
    base_url: https://api.openai.com
    protocols: [openai.chat]
credentials:
  - id: openai-k1
    secret_env: OPENAI_KEY_1
    endpoints: [openai-main]
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [openai-main]}
`)
	env := map[string]string{"OPENAI_KEY_1": "sk-example"} // in production: os.LookupEnv
	c, err := config.Load(catalog, func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Server.Listen, c.Models[0].Strategy, c.Endpoints[0].Timeouts.Total.D())
	// Output: 127.0.0.1:8080 round-robin 10m0s
}

// Load reports every problem at once, each with its line or its path.
func ExampleLoad_errors() {
	catalog := []byte(`
version: 1
endpoints:
  - id: openai-main
    base_url: https://api.openai.com
    protocols: [openai.chat]
credentials:
  - id: openai-k1
    account: org-1
    secret_env: OPENAI_KEY_1
    endpoints: [openai-main]
models:
  - alias: fast
    deployments:
      - {model: gpt-4o-mini, endpoints: [openai-main], weight: -1}
`)
	_, err := config.Load(catalog, func(string) (string, bool) { return "", false })
	fmt.Println(err)
	// Output:
	// credentials[0].account: unknown account "org-1"
	// credentials[0].secret_env: environment variable OPENAI_KEY_1 is not set
	// models[0].deployments[0].weight: must be > 0
}
