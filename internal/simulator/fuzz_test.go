package simulator_test

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// FuzzProtocolBodies sends arbitrary bodies to chat, Messages and Responses:
// whatever a client sends, the simulator answers, and every JSON body and
// every SSE data line it sends is valid JSON.
func FuzzProtocolBodies(f *testing.F) {
	for _, p := range protocols {
		f.Add(p.body(false), false)
		f.Add(p.body(true), true)
	}
	f.Add(messagesBody(`"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2048,`+weatherTool, `[{"role":"user","content":"\"use_tool\u2028"}]`), true)
	f.Add(`{"model":"m","stream":true,"instructions":"\u0000","input":[{"role":"user","content":"use_tool"}],"tool_choice":"required",`+fnTool+`}`, true)
	f.Add(`{"model":"m","input":[{"type":"function_call_output","output":[{"type":"input_text","text":"x"}]}]}`, false)
	sim := simulator.New(simulator.Options{})
	f.Fuzz(func(t *testing.T, body string, stream bool) {
		for _, p := range protocols {
			req := httptest.NewRequest("POST", p.path, strings.NewReader(body))
			p.header(req.Header, "k")
			w := httptest.NewRecorder()
			sim.ServeHTTP(w, req)
			out := w.Body.String()
			switch ctype := w.Header().Get("Content-Type"); {
			case ctype == "application/json":
				if !json.Valid([]byte(out)) {
					t.Errorf("%s answered %d with invalid JSON %q", p.name, w.Code, out)
				}
			case strings.HasPrefix(ctype, "text/event-stream"):
				sc := bufio.NewScanner(strings.NewReader(out))
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					data, ok := strings.CutPrefix(sc.Text(), "data: ")
					if ok && data != "[DONE]" && !json.Valid([]byte(data)) {
						t.Errorf("%s sent invalid event data %q", p.name, data)
					}
				}
			default:
				t.Errorf("%s answered %d with content type %q", p.name, w.Code, ctype)
			}
		}
	})
}
