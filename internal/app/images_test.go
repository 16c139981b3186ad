package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// imagesTemplate is accountsTemplate with k1 (account org-1, one request
// at a time) serving m-one and k2 (org-2) serving m-vision, and two
// aliases that say what their models take: text-only (m-one, text) and
// mixed (m-vision, which takes images, first; m-one, text only, as its
// fallback).
func imagesTemplate() string {
	tpl := strings.Replace(accountsTemplate, "%smodels:", "  - {id: k1, account: org-1, secret_env: K1, endpoints: [ep-a], models: [m-one]}\n"+
		"  - {id: k2, account: org-2, secret_env: K2, endpoints: [ep-a], models: [m-vision]}\nmodels:", 1)
	tpl = strings.Replace(tpl, "org-1, quota_scope: account, max_inflight: 2", "org-1, quota_scope: account, max_inflight: 1", 1)
	return strings.Replace(tpl, "keys:\n", "  - alias: text-only\n    deployments: [{model: m-one, endpoints: [ep-a], input: [text]}]\n"+
		"  - alias: mixed\n    deployments:\n      - {model: m-vision, endpoints: [ep-a], input: [text, image]}\n"+
		"      - {model: m-one, endpoints: [ep-a], priority: 1, input: [text]}\nkeys:\n", 1)
}

// imageRequests are a request with an image part per caller protocol, for
// the model %[1]s, and the field of the image.
var imageRequests = map[*callerSide]malformed{
	chatCaller: {`{"model":"%[1]s","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`, "messages[0].content[1]"},
	messagesCaller: {`{"model":"%[1]s","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},` +
		`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"what is this?"}]}]}`, "messages[2].content[0]"},
	responsesCaller: {`{"model":"%[1]s","input":[{"role":"user","content":[{"type":"input_text","text":"what is this?"},` +
		`{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`, "input[0].content[1]"},
	geminiCaller: {`{"contents":[{"role":"user","parts":[{"text":"what is this?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]}]}`, "contents[0].parts[1]"},
}

var imageCallers = []*callerSide{chatCaller, messagesCaller, responsesCaller, geminiCaller}

// imageBody is c's image request for model.
func imageBody(c *callerSide, model string) string {
	return strings.ReplaceAll(imageRequests[c].body, "%[1]s", model)
}

// TestImagesToATextOnlyAliasRefusedBeforeAnyClaim: with the only account
// of alias text-only full (a request held upstream, so a valid request
// told not to wait is refused with 429), a request with an image, of each
// caller protocol, told not to wait either, gets 400 invalid_request in
// the caller's envelope naming the image part: it was refused before it
// asked for a claim. The simulator sees none of them, and each is counted
// as image_input.
func TestImagesToATextOnlyAliasRefusedBeforeAnyClaim(t *testing.T) {
	h := withAccountFull(t, imagesTemplate(), "text-only")

	noWait := map[string]string{"X-Sluice-Max-Wait": "0"}
	for _, c := range imageCallers {
		if status, got := h.ask(t.Context(), c, keyWeb, "text-only", "hi", noWait); status != http.StatusTooManyRequests {
			t.Fatalf("%s: a text request with X-Sluice-Max-Wait: 0 on the full account = %d %s, want 429", c.protocol, status, got)
		}
	}
	seen := len(h.simA.Requests())
	for _, c := range imageCallers {
		t.Run(string(c.protocol), func(t *testing.T) {
			resp := h.send(t.Context(), c, keyWeb, "text-only", false, imageBody(c, "text-only"), noWait)
			if resp == nil {
				t.FailNow()
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			field := imageRequests[c].field
			if code, ok := c.errorCode(string(raw)); resp.StatusCode != http.StatusBadRequest || !ok || code != "invalid_request" || !strings.Contains(string(raw), field+" is an image") {
				t.Errorf("= %d %s, want 400 invalid_request in the caller's envelope naming %s", resp.StatusCode, raw, field)
			}
		})
	}
	if n := len(h.simA.Requests()); n != seen {
		t.Errorf("the simulator received %d requests with images, want none", n-seen)
	}
	_, metrics := h.adminGet("/metrics")
	for _, c := range imageCallers {
		if want := `sluice_requests_invalid_total{protocol="` + string(c.protocol) + `",reason="image_input"} 1`; !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
}

// TestImagesStayOnTheVisionDeployment: alias mixed serves a request with
// an image, of each caller protocol, from its vision deployment, and a
// text request too (it comes first). Once the vision deployment's only
// credential is refused upstream (401: disabled), a text request falls
// back to the text-only deployment, but a request with an image never
// does: it is not served (no upstream available), and the text-only
// model never sees an image.
func TestImagesStayOnTheVisionDeployment(t *testing.T) {
	h := newHarnessWith(t, imagesTemplate(), "{backend: memory}", simAccounts())
	lastModel := func() string {
		reqs := h.simA.Requests()
		return reqs[len(reqs)-1].Model
	}
	for _, c := range imageCallers {
		if status, got := h.ask(t.Context(), c, keyWeb, "mixed", "hi", nil); status != http.StatusOK || lastModel() != "m-vision" {
			t.Errorf("%s: text to mixed = %d %s on %s, want 200 on m-vision", c.protocol, status, got, lastModel())
		}
		resp := h.send(t.Context(), c, keyWeb, "mixed", false, imageBody(c, "mixed"), nil)
		if resp == nil {
			t.FailNow()
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || lastModel() != "m-vision" {
			t.Errorf("%s: image to mixed = %d %s on %s, want 200 on m-vision", c.protocol, resp.StatusCode, raw, lastModel())
		}
	}

	h.simA.SetKey(upstreamKey("k2"), simulator.Behavior{Account: "org-2", Invalid: true})
	seen := len(h.simA.Requests())
	for _, c := range imageCallers {
		resp := h.send(t.Context(), c, keyWeb, "mixed", false, imageBody(c, "mixed"), nil)
		if resp == nil {
			t.FailNow()
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: image to mixed without its vision credential = 200 %s, want a failure", c.protocol, raw)
		}
	}
	for _, r := range h.simA.Requests()[seen:] {
		if r.Model != "m-vision" {
			t.Errorf("an image request reached %s, want m-vision only", r.Model)
		}
	}
	for _, c := range imageCallers {
		if status, got := h.ask(t.Context(), c, keyWeb, "mixed", "hi", nil); status != http.StatusOK || lastModel() != "m-one" {
			t.Errorf("%s: text to mixed without its vision credential = %d %s on %s, want 200 on m-one", c.protocol, status, got, lastModel())
		}
	}
}
