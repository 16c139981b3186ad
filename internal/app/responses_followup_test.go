package app_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// TestStoredResponseCancelFollowsItsBinding: POST /v1/responses/{id}/cancel
// (and under /backend-api/codex/) goes to the credential that stored the
// background response, though the alias rotates over two accounts; another
// key and an unknown id get OpenAI's 404, through the official SDK.
func TestStoredResponseCancelFollowsItsBinding(t *testing.T) {
	h := newHarnessWith(t, responsesBindingTemplate, "{backend: memory}", simulator.Options{})
	ctx := t.Context()
	client := h.sdk(keyWeb)
	created, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "conv", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a long task")}, Background: openai.Bool(true),
	})
	if err != nil || created.Status != "queued" {
		t.Fatalf("background response = %+v, %v; want one queued", created, err)
	}
	var apiErr *openai.Error
	if _, err := h.sdk(testEnv["KEY_BG"]).Responses.Cancel(ctx, created.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Cancel with another key = %v, want 404", err)
	}
	if _, err := client.Responses.Cancel(ctx, "resp_unknown"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type != "not_found_error" {
		t.Errorf("Cancel an unknown id = %v, want OpenAI's 404", err)
	}
	cancelled, err := client.Responses.Cancel(ctx, created.ID)
	if err != nil || cancelled.ID != created.ID || cancelled.Status != "cancelled" {
		t.Fatalf("Cancel = %+v, %v; want the response cancelled", cancelled, err)
	}
	var again struct{ ID, Status string }
	if code, body := call(t, http.MethodPost, h.url("/backend-api/codex/responses/"+created.ID+"/cancel"), "Bearer "+keyWeb, "", &again); code != http.StatusOK || again.Status != "cancelled" {
		t.Errorf("cancel under /backend-api/codex = %d %s, want the cancelled response", code, body)
	}
	if got, err := client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}); err != nil || got.Status != "cancelled" {
		t.Errorf("Get after cancelling = %+v, %v; want it cancelled (the binding stays)", got, err)
	}
	if code, body := call(t, http.MethodPut, h.url("/v1/responses/"+created.ID), "Bearer "+keyWeb, "", nil); code != http.StatusMethodNotAllowed ||
		!strings.Contains(body, `"code":"method_not_allowed"`) {
		t.Errorf("PUT a stored response = %d %s, want OpenAI's 405", code, body)
	}
	a, b := len(h.simA.Requests()), len(h.simB.Requests())
	if a+b != 4 || a*b != 0 {
		t.Errorf("upstream calls: %d on org-small, %d on org-big; want the creation, two cancels and the GET on one", a, b)
	}
}

// TestStoredResponseStreamsAgain: a GET's query reaches the upstream that
// stored the response, so GET ?stream=true&starting_after=N streams its
// events after N (the official SDK's GetStreaming, given the query), and
// a plain GET answers JSON.
func TestStoredResponseStreamsAgain(t *testing.T) {
	h := newHarnessWith(t, responsesBindingTemplate, "{backend: memory}", simulator.Options{})
	ctx := t.Context()
	client := h.sdk(keyWeb)
	first := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "conv", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")},
	})
	id, created := "", 0
	for first.Next() {
		ev := first.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		created++
	}
	if err := first.Err(); err != nil || id == "" {
		t.Fatalf("streamed creation: id %q, %v", id, err)
	}
	// openai-go's GetStreaming says stream in a JSON body, which a GET
	// carries to no one: the API reads it from the query.
	again := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(2)}, option.WithQuery("stream", "true"))
	var seqs []int64
	last := ""
	for again.Next() {
		seqs = append(seqs, again.Current().SequenceNumber)
		last = again.Current().Type
	}
	if err := again.Err(); err != nil || len(seqs) != created-3 || seqs[0] != 3 || last != "response.completed" {
		t.Fatalf("streamed again after 2 = sequence numbers %v ending %s, %v; want the %d events from 3 to response.completed", seqs, last, err, created-3)
	}
	if got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{}); err != nil || got.ID != id || got.OutputText() == "" {
		t.Errorf("Get = %+v, %v; want the stored response", got, err)
	}
	a, b := len(h.simA.Requests()), len(h.simB.Requests())
	if a+b != 3 || a*b != 0 {
		t.Errorf("upstream calls: %d on org-small, %d on org-big; want all three on one", a, b)
	}
}

// TestResponsesCompact: POST /v1/responses/compact (and under
// /backend-api/codex/) goes to the alias's Responses endpoint at its
// /v1/responses/compact, through the official SDK, and its usage is
// recorded like any request's; an alias deployed on a chat endpoint cannot
// compact (400 in OpenAI's envelope saying why), nor can a streamed
// compaction.
func TestResponsesCompact(t *testing.T) {
	h := newResponsesHarness(t)
	ctx := t.Context()
	client := h.sdk(keyWeb)
	got, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model: "gpt-resp", Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("a long conversation")},
	})
	if err != nil || got.Object != "response.compaction" || len(got.Output) != 1 || got.Usage.InputTokens == 0 {
		t.Fatalf("Compact = %+v, %v; want one compaction item and usage", got, err)
	}
	if rec := lastRequest(t, h.simA); rec.Path != "/v1/responses/compact" || rec.Model != "gpt-4o-mini" || rec.Key != secretA1 {
		t.Errorf("simulator got %s model %q key %q; want /v1/responses/compact with the deployment's model and the credential", rec.Path, rec.Model, rec.Key)
	}
	recs := h.usage(t, 1)
	if r := recs[len(recs)-1]; r.Alias != "gpt-resp" || r.Protocol != sluice.ProtocolOpenAIResponses || len(r.Executions) != 1 ||
		r.Usage.PromptTokens != got.Usage.InputTokens || r.Usage.CompletionTokens != got.Usage.OutputTokens {
		t.Errorf("usage record = %+v, want the compaction's usage %+v on gpt-resp", r, got.Usage)
	}

	var apiErr *openai.Error
	_, err = client.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model: "resp-on-chat", Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("hi")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "cannot compact") {
		t.Errorf("Compact on a chat-deployed alias = %v, want a 400 saying it cannot compact", err)
	}
	code, _, body := h.post(ctx, "/v1/responses/compact", keyWeb, `{"model":"gpt-resp","input":"hi","stream":true}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "stream") {
		t.Errorf("streamed compaction = %d %s, want a 400 naming stream", code, body)
	}
	code, _, body = h.post(ctx, "/backend-api/codex/responses/compact", keyWeb, `{"model":"gpt-resp","input":"hi"}`)
	if code != http.StatusOK || !strings.Contains(body, `"response.compaction"`) || lastRequest(t, h.simA).Path != "/v1/responses/compact" {
		t.Errorf("compaction under /backend-api/codex = %d %s, want the compaction", code, body)
	}
}
