package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// redactionTemplate is catalogTemplate with a redaction policy on key web
// (mask e-mail addresses and phone numbers and put them back in the
// answer, block card numbers); key scoped has none.
var redactionTemplate = strings.Replace(catalogTemplate, "  - {id: web, tenant: web, secret_env: KEY_WEB}\n",
	"  - {id: web, tenant: web, secret_env: KEY_WEB, redaction: pii}\n", 1) + `redaction:
  - id: pii
    detectors: {email: mask, phone: mask, card: block}
    restore: true
`

const (
	plantedEmail = "alice.liu@example.com"
	plantedPhone = "13812345678"
	plantedCard  = "4111 1111 1111 1111"
	// maskedPrompt is the text the caller sends, and placeholderAnswer
	// what the simulator answers with, naming the placeholders the
	// upstream saw.
	maskedPrompt      = "请联系 " + plantedEmail + " 或致电 " + plantedPhone + "."
	placeholderAnswer = "Reply to [EMAIL_1] or call [PHONE_1]."
)

// answerWithPlaceholders makes simA's credentials answer chat with
// placeholderAnswer: as JSON, or streamed with each placeholder split
// across two events.
func answerWithPlaceholders(h *harness, stream bool) {
	b := simulator.Behavior{AnswerType: "application/json", Answer: `{"id":"chatcmpl-r1","object":"chat.completion","created":1,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + quote(placeholderAnswer) + `},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`}
	if stream {
		var sse strings.Builder
		chunk := func(choices string) {
			fmt.Fprintf(&sse, "data: {\"id\":\"chatcmpl-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[%s]}\n\n", choices)
		}
		for _, piece := range []string{"Reply to [EM", "AIL_1] or call [", "PHONE_1", "]."} {
			chunk(`{"index":0,"delta":{"content":` + quote(piece) + `},"finish_reason":null}`)
		}
		chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`)
		sse.WriteString("data: {\"id\":\"chatcmpl-r1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":8,\"total_tokens\":20}}\n\n")
		sse.WriteString("data: [DONE]\n\n")
		b = simulator.Behavior{Answer: sse.String(), AnswerType: "text/event-stream"}
	}
	h.simA.SetKey(secretA1, b)
	h.simA.SetKey(secretA2, b)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRedactionMasksAndRestores: for a caller of each protocol (on a chat
// deployment), the upstream sees placeholders, never the values, and the
// caller gets the values back in the answer, whole and streamed, where
// the stream split each placeholder across events.
func TestRedactionMasksAndRestores(t *testing.T) {
	h := newHarnessWith(t, redactionTemplate, "{backend: memory}", simulator.Options{})
	for _, c := range []*callerSide{chatCaller, messagesCaller, responsesCaller, geminiCaller} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", c.protocol, stream), func(t *testing.T) {
				answerWithPlaceholders(h, stream)
				resp := h.send(t.Context(), c, keyWeb, "fast", stream, c.body("fast", maskedPrompt, stream), nil)
				if resp == nil {
					t.FailNow()
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body := string(raw)
				sent := string(lastRequest(t, h.simA).Body)
				if strings.Contains(sent, plantedEmail) || strings.Contains(sent, plantedPhone) || !strings.Contains(sent, "[EMAIL_1]") || !strings.Contains(sent, "[PHONE_1]") {
					t.Errorf("the upstream got %s; want placeholders for the e-mail address and the phone number", sent)
				}
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, plantedEmail) || !strings.Contains(body, plantedPhone) ||
					strings.Contains(body, "[EM") || strings.Contains(body, "PHONE_1") {
					t.Errorf("the caller got %d %s; want the values restored", resp.StatusCode, body)
				}
				if stream {
					for _, ev := range readEvents(&http.Response{Body: io.NopCloser(strings.NewReader(body))}) {
						if ev.data != "[DONE]" && !json.Valid([]byte(ev.data)) {
							t.Errorf("event %q: data is not JSON", ev.data)
						}
					}
				}
			})
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, plantedEmail) || strings.Contains(logs, plantedPhone) {
		t.Errorf("a masked value reached the logs:\n%s", logs)
	}
	_, metrics := h.adminGet("/metrics")
	if !strings.Contains(metrics, `sluice_redaction_findings_total{action="mask",detector="email"} 8`) ||
		!strings.Contains(metrics, `sluice_redaction_findings_total{action="mask",detector="phone"} 8`) || strings.Contains(metrics, plantedEmail) {
		t.Errorf("metrics: want 8 masked e-mail addresses and phone numbers counted, never a value:\n%s", grepLines(metrics, "redaction"))
	}
}

// TestRedactionIsConsistentAcrossParts: the same value gets the same
// placeholder in every text part of a request (system, and a user
// message's text parts), another value the next number.
func TestRedactionIsConsistentAcrossParts(t *testing.T) {
	h := newHarnessWith(t, redactionTemplate, "{backend: memory}", simulator.Options{})
	body := `{"model":"fast","messages":[{"role":"system","content":"Our contact: ` + plantedEmail + `"},` +
		`{"role":"user","content":[{"type":"text","text":"write to ` + plantedEmail + `"},{"type":"text","text":"cc bob@example.org"}]}]}`
	if status, _, got := h.post(t.Context(), "/v1/chat/completions", keyWeb, body); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, got)
	}
	want := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Our contact: [EMAIL_1]"},` +
		`{"role":"user","content":[{"type":"text","text":"write to [EMAIL_1]"},{"type":"text","text":"cc [EMAIL_2]"}]}]`
	if sent := string(lastRequest(t, h.simA).Body); !strings.HasPrefix(sent, want) {
		t.Errorf("the upstream got\n%s\nwant it to start\n%s", sent, want)
	}
}

// TestRedactionBlocks: a blocked kind of value is refused with 400
// sensitive_data_blocked in the caller's envelope, naming the detector and
// not the value, and nothing reaches the upstream; a key without a
// policy is not touched.
func TestRedactionBlocks(t *testing.T) {
	h := newHarnessWith(t, redactionTemplate, "{backend: memory}", simulator.Options{})
	for _, c := range []*callerSide{chatCaller, messagesCaller, responsesCaller, geminiCaller} {
		status, body := h.ask(t.Context(), c, keyWeb, "fast", "charge card "+plantedCard+" please", nil)
		code, ok := c.errorCode(body)
		if status != http.StatusBadRequest || !ok || code != "sensitive_data_blocked" || !strings.Contains(body, "card") || strings.Contains(body, "4111") {
			t.Errorf("%s: %d %s; want 400 sensitive_data_blocked naming the card detector, not the number", c.protocol, status, body)
		}
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 0 {
		t.Errorf("the upstream got %d requests; want none", n)
	}
	if status, _ := h.ask(t.Context(), chatCaller, keyScoped, "fast", "card "+plantedCard+" mail "+plantedEmail, nil); status != http.StatusOK {
		t.Fatalf("a key without a policy: status %d", status)
	}
	if sent := string(lastRequest(t, h.simA).Body); !strings.Contains(sent, plantedCard) || !strings.Contains(sent, plantedEmail) {
		t.Errorf("a key without a policy: the upstream got %s; want the text as sent", sent)
	}
	_, metrics := h.adminGet("/metrics")
	if !strings.Contains(metrics, `sluice_redaction_findings_total{action="block",detector="card"} 4`) {
		t.Errorf("metrics: want 4 blocked cards:\n%s", grepLines(metrics, "redaction"))
	}
}

func grepLines(text, word string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestRedactionUnion: a request gets the union of its key's, tenant's and
// alias's policies, the strictest action winning — here the tenant's mask
// for every key of the tenant, and the alias only-a's block on top.
func TestRedactionUnion(t *testing.T) {
	template := strings.Replace(catalogTemplate, "  - alias: only-a\n", "  - alias: only-a\n    redaction: no-email\n", 1) + `tenants:
  - {id: web, redaction: mask-email}
redaction:
  - {id: mask-email, detectors: {email: mask}}
  - {id: no-email, detectors: {email: block}}
`
	h := newHarnessWith(t, template, "{backend: memory}", simulator.Options{})
	for _, key := range []string{keyWeb, keyScoped} {
		if status, _ := h.ask(t.Context(), chatCaller, key, "fast", "mail "+plantedEmail, nil); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		if sent := string(lastRequest(t, h.simA).Body); strings.Contains(sent, plantedEmail) || !strings.Contains(sent, "[EMAIL_1]") {
			t.Errorf("a key of tenant web: the upstream got %s; want the address masked", sent)
		}
	}
	before := len(h.simA.Requests())
	status, body := h.ask(t.Context(), chatCaller, keyWeb, "only-a", "mail "+plantedEmail, nil)
	if code, _ := chatCaller.errorCode(body); status != http.StatusBadRequest || code != "sensitive_data_blocked" || len(h.simA.Requests()) != before {
		t.Errorf("alias only-a: %d %s; want its block to win over the tenant's mask, nothing sent", status, body)
	}
}
