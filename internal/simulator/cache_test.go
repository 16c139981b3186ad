package simulator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// The prompt cache: a conversation's next turn reads its previous prompt
// from the cache of the account that served it, in each protocol's usage
// fields; another account, or the same after the TTL, reads nothing.
func TestPromptCache(t *testing.T) {
	_, srv := start(t, simulator.Options{PromptCache: 300 * time.Millisecond, Keys: map[string]simulator.Behavior{
		"a1": {Account: "acct-a"}, "a2": {Account: "acct-a"}, "b1": {Account: "acct-b"},
	}})
	type usage struct{ prompt, cached int }
	// Each protocol its own conversation: one conversation gets the same
	// prefixes in every protocol.
	protocols := []struct {
		name string
		path string
		body func(turns int) string
		read func(b []byte) usage
	}{
		{"chat", "/v1/chat/completions", func(n int) string {
			return `{"model":"m","messages":[{"role":"system","content":"chat sys words"}` + history(n, "content") + `]}`
		}, func(b []byte) usage {
			var r struct {
				Usage struct {
					Prompt  int `json:"prompt_tokens"`
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			json.Unmarshal(b, &r)
			return usage{r.Usage.Prompt, r.Usage.Details.Cached}
		}},
		{"messages", "/v1/messages", func(n int) string {
			return `{"model":"m","max_tokens":64,"system":"messages sys words","messages":[` + history(n, "content")[1:] + `]}`
		}, func(b []byte) usage {
			var r struct {
				Usage struct {
					Input int `json:"input_tokens"`
					Read  int `json:"cache_read_input_tokens"`
					Write int `json:"cache_creation_input_tokens"`
				} `json:"usage"`
			}
			json.Unmarshal(b, &r)
			return usage{r.Usage.Input + r.Usage.Read + r.Usage.Write, r.Usage.Read}
		}},
		{"responses", "/v1/responses", func(n int) string {
			return `{"model":"m","store":false,"instructions":"responses sys words","input":[` + history(n, "content")[1:] + `]}`
		}, func(b []byte) usage {
			var r struct {
				Usage struct {
					Input   int `json:"input_tokens"`
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
			}
			json.Unmarshal(b, &r)
			return usage{r.Usage.Input, r.Usage.Details.Cached}
		}},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			ask := func(key string, turns int) usage {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+p.path, strings.NewReader(p.body(turns)))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("anthropic-version", "2023-06-01")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b := readAll(t, resp)
				if resp.StatusCode != 200 {
					t.Fatalf("%s = %d %s", p.path, resp.StatusCode, b)
				}
				return p.read(b)
			}
			first := ask("a1", 1)
			if first.cached != 0 || first.prompt == 0 {
				t.Fatalf("first turn: %+v, want a prompt and nothing cached", first)
			}
			if got := ask("a2", 2); got.cached != first.prompt { // a2 shares acct-a's cache
				t.Errorf("next turn on the same account: cached %d, want the first turn's whole prompt %d", got.cached, first.prompt)
			}
			if got := ask("b1", 2); got.cached != 0 {
				t.Errorf("next turn on another account: cached %d, want 0", got.cached)
			}
			time.Sleep(350 * time.Millisecond)
			if got := ask("a1", 3); got.cached != 0 {
				t.Errorf("a turn after the TTL: cached %d, want 0", got.cached)
			}
		})
	}
}

// history is n user turns with answers between them, as message objects
// each led by a comma.
func history(n int, field string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			fmt.Fprintf(&b, `,{"role":"assistant","%s":"answer %d"}`, field, i)
		}
		fmt.Fprintf(&b, `,{"role":"user","%s":"question number %d"}`, field, i)
	}
	return b.String()
}
