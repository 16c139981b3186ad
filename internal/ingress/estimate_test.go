package ingress

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// Prompts of three kinds, for the estimate's error against the simulated
// provider's count (a token per word and per CJK character, three per
// message and three more).
var estimateCorpora = map[string][]string{
	"english": {
		"You are a careful assistant. Answer briefly and cite the document you used.",
		"Our quarterly report shows revenue grew by twelve percent, driven by the new subscription tier in Europe and strong renewals in North America.",
		"Summarise the following meeting notes for an engineer who missed the call, keeping every decision and owner.",
	},
	"chinese": {
		"你是一名严谨的助手，请简要回答，并注明所依据的文档。",
		"本季度报告显示，收入增长了百分之十二，主要来自欧洲的新订阅套餐以及北美的续约。",
		"请为没有参加会议的工程师总结以下会议记录，保留每一项决定及其负责人。",
	},
	"code": {
		"Review this function for bugs:",
		"func retry(ctx context.Context, n int, f func() error) error {\n\tvar err error\n\tfor i := 0; i < n; i++ {\n\t\tif err = f(); err == nil {\n\t\t\treturn nil\n\t\t}\n\t\tselect {\n\t\tcase <-ctx.Done():\n\t\t\treturn ctx.Err()\n\t\tcase <-time.After(time.Duration(1<<i) * 100 * time.Millisecond):\n\t\t}\n\t}\n\treturn fmt.Errorf(\"after %d tries: %w\", n, err)\n}",
		"def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(), value.strip()",
	},
}

// TestEstimateAgainstTheSimulator: for English, Chinese and code prompts,
// the estimate never reserves less than the simulated provider counts (a
// byte count does, for Chinese: three bytes a character make 0.75 of a
// token). The ratios are logged: docs/routing.md quotes them.
func TestEstimateAgainstTheSimulator(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	defer func() { sim.Close(); srv.Close() }()
	for _, kind := range []string{"english", "chinese", "code"} {
		var msgs []map[string]string
		for i, text := range estimateCorpora[kind] {
			role := "user"
			if i == 0 {
				role = "system"
			}
			msgs = append(msgs, map[string]string{"role": role, "content": text})
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": msgs, "max_tokens": 1})
		req, err := Parse(sluice.ProtocolOpenAIChat, body)
		if err != nil {
			t.Fatal(err)
		}
		call, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(string(body)))
		call.Header.Set("Authorization", "Bearer sk-upstream-estimate")
		call.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(call)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Usage struct {
				PromptTokens int64 `json:"prompt_tokens"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		counted, estimated, byBytes := answer.Usage.PromptTokens, req.PromptEstimate(), int64(len(body)/4+1)
		t.Logf("%s: simulator %d tokens, estimate %d (%.2f×), a byte count %d (%.2f×)", kind, counted, estimated,
			float64(estimated)/float64(counted), byBytes, float64(byBytes)/float64(counted))
		if counted <= 0 || estimated < counted {
			t.Errorf("%s: estimate %d below the %d tokens counted", kind, estimated, counted)
		}
		if kind == "chinese" && byBytes >= counted {
			t.Errorf("chinese: a byte count (%d) covers the %d tokens counted: the corpus no longer shows why characters are counted", byBytes, counted)
		}
	}
}
