package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/simulator"
)

// responseObject is a Responses answer, with the fields a gateway relies on.
type responseObject struct {
	ID                 string       `json:"id"`
	Object             string       `json:"object"`
	Status             string       `json:"status"`
	Model              string       `json:"model"`
	PreviousResponseID *string      `json:"previous_response_id"`
	Output             []outputItem `json:"output"`
	IncompleteDetails  *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

type outputItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status,omitempty"`
	Role    string `json:"role,omitempty"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// text is the text of the response's message, "" for none.
func (r responseObject) text() string {
	for _, it := range r.Output {
		if it.Type == "message" && len(it.Content) > 0 {
			return it.Content[0].Text
		}
	}
	return ""
}

const fnTool = `"tools":[{"type":"web_search"},{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`

func createResponse(t *testing.T, srv *httptest.Server, key, path, body string) (responseObject, *http.Response) {
	t.Helper()
	resp := post(t, srv, key, path, body)
	raw := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d (%s), want 200", resp.StatusCode, raw)
	}
	var r responseObject
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return r, resp
}

func TestResponsesJSON(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	toolTurn := `[{"role":"user","content":"weather? use_tool"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},{"type":"function_call_output","call_id":"call_1","output":"4 C"}]`
	tests := []struct {
		name          string
		give          string
		wantItems     []string
		wantStatus    string
		wantOutput    int
		wantCached    bool
		wantReasoning int
	}{
		{"text", `{"model":"gpt-5","input":"Say hello to the world"}`, []string{"message"}, "completed", 16, false, 0},
		{"message items", `{"model":"gpt-5","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Say hello"}]}]}`, []string{"message"}, "completed", 16, false, 0},
		{"max_output_tokens", `{"model":"gpt-5","input":"hi","max_output_tokens":3}`, []string{"message"}, "incomplete", 3, false, 0},
		{"prompt_cache_key", `{"model":"gpt-5","input":"Say hello to the world","prompt_cache_key":"s1"}`, []string{"message"}, "completed", 16, true, 0},
		{"reasoning", `{"model":"gpt-5","input":"hi","reasoning":{"effort":"low"}}`, []string{"reasoning", "message"}, "completed", 8 + 16, false, 8},
		{"tool asked by the word", `{"model":"gpt-5","input":"weather? use_tool",` + fnTool + `}`, []string{"function_call"}, "completed", 0, false, 0},
		{"tool required", `{"model":"gpt-5","input":"hi","tool_choice":"required",` + fnTool + `}`, []string{"function_call"}, "completed", 0, false, 0},
		{"tool named", `{"model":"gpt-5","input":"hi","tool_choice":{"type":"function","name":"get_weather"},` + fnTool + `}`, []string{"function_call"}, "completed", 0, false, 0},
		{"tool_choice none", `{"model":"gpt-5","input":"use_tool","tool_choice":"none",` + fnTool + `}`, []string{"message"}, "completed", 16, false, 0},
		{"answer to a tool output", `{"model":"gpt-5","input":` + toolTurn + `,` + fnTool + `}`, []string{"message"}, "completed", 16, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := createResponse(t, srv, "sk-a", "/v1/responses", tt.give)
			if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Model != "gpt-5" || r.Status != tt.wantStatus {
				t.Errorf("envelope = %s %s %s %s, want resp_, response, gpt-5, %s", r.ID, r.Object, r.Model, r.Status, tt.wantStatus)
			}
			var kinds []string
			for _, it := range r.Output {
				kinds = append(kinds, it.Type)
			}
			if diff := cmp.Diff(tt.wantItems, kinds); diff != "" {
				t.Errorf("output items (-want +got):\n%s", diff)
			}
			u := r.Usage
			if u == nil {
				t.Fatal("no usage")
			}
			if tt.wantOutput > 0 && u.OutputTokens != tt.wantOutput {
				t.Errorf("output_tokens = %d, want %d", u.OutputTokens, tt.wantOutput)
			}
			if u.TotalTokens != u.InputTokens+u.OutputTokens || (u.InputTokensDetails.CachedTokens > 0) != tt.wantCached ||
				u.OutputTokensDetails.ReasoningTokens != tt.wantReasoning {
				t.Errorf("usage = %+v, want cached %v, reasoning %d", *u, tt.wantCached, tt.wantReasoning)
			}
			if tt.wantStatus == "incomplete" && (r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens") {
				t.Errorf("incomplete_details = %+v, want max_output_tokens", r.IncompleteDetails)
			}
			if it := r.Output[len(r.Output)-1]; it.Type == "function_call" {
				var args struct{ City string }
				if err := json.Unmarshal([]byte(it.Arguments), &args); err != nil || args.City == "" || it.Name != "get_weather" ||
					!strings.HasPrefix(it.CallID, "call_") || !strings.HasPrefix(it.ID, "fc_") {
					t.Errorf("function call %+v, want get_weather with a city, call_ and fc_ ids", it)
				}
			}
		})
	}
}

// TestResponsesAnswerLikeChat checks a Responses request gets the chat
// answer of the same conversation.
func TestResponsesAnswerLikeChat(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	chat := complete(t, srv.URL, `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the world"}]}`)
	r, _ := createResponse(t, srv, "k", "/v1/responses", `{"model":"m","instructions":"Be brief.","input":"Say hello to the world"}`)
	if got, want := r.text(), chat.Choices[0].Message.Content; got != want {
		t.Errorf("Responses text = %q, chat content %q: want the same", got, want)
	}
}

// respEvent is the union of the Responses stream events' fields.
type respEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int            `json:"sequence_number"`
	Response       *responseObject `json:"response"`
	OutputIndex    int             `json:"output_index"`
	ItemID         string          `json:"item_id"`
	Item           *outputItem     `json:"item"`
	Delta          string          `json:"delta"`
	Text           string          `json:"text"`
	Arguments      string          `json:"arguments"`
	Code           string          `json:"code"`
}

func streamResponse(t *testing.T, srv *httptest.Server, key, path, body string) ([]namedEvent, error) {
	t.Helper()
	resp := post(t, srv, key, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream answer %d %s %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readNamedEvents(t, resp.Body)
}

func TestResponsesSSE(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	tests := []struct {
		name      string
		give      string
		wantNames []string
	}{
		{"text", `{"model":"gpt-5","input":"Say hello to the world"}`, []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed"}},
		{"reasoning and tool", `{"model":"gpt-5","input":"use_tool","reasoning":{"effort":"high"},` + fnTool + `}`, []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.done", "response.output_item.done",
			"response.completed"}},
		{"incomplete", `{"model":"gpt-5","input":"hi","max_output_tokens":2}`, []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.incomplete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _ := createResponse(t, srv, "k", "/v1/responses", tt.give)
			events, err := streamResponse(t, srv, "k", "/v1/responses", strings.Replace(tt.give, "{", `{"stream":true,`, 1))
			if err != nil {
				t.Fatalf("stream ended with %v", err)
			}
			var names []string
			var text, args string
			var final *responseObject
			for i, e := range events {
				var ev respEvent
				if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.Type != e.name {
					t.Fatalf("event %d %s: type %q, %v; want the event name", i, e.data, ev.Type, err)
				}
				if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
					t.Errorf("event %d sequence_number %v", i, ev.SequenceNumber)
				}
				switch e.name {
				case "response.output_text.delta":
					text += ev.Delta
					continue
				case "response.function_call_arguments.delta":
					args += ev.Delta
					continue
				case "response.output_text.done":
					if ev.Text != text {
						t.Errorf("output_text.done %q, deltas %q", ev.Text, text)
					}
				case "response.function_call_arguments.done":
					if ev.Arguments != args {
						t.Errorf("arguments.done %q, deltas %q", ev.Arguments, args)
					}
				case "response.created", "response.in_progress":
					if ev.Response.Status != "in_progress" || len(ev.Response.Output) != 0 || ev.Response.Usage != nil {
						t.Errorf("%s response = %+v, want in_progress, no output, no usage", e.name, *ev.Response)
					}
				case "response.completed", "response.incomplete":
					final = ev.Response
				}
				names = append(names, e.name)
			}
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("events without deltas (-want +got):\n%s", diff)
			}
			if final == nil {
				t.Fatal("no terminal event")
			}
			if text != want.text() || final.text() != want.text() || final.Status != want.Status {
				t.Errorf("streamed %q, final %q %s; want the JSON answer %q %s", text, final.text(), final.Status, want.text(), want.Status)
			}
			if diff := cmp.Diff(want.Usage, final.Usage); diff != "" {
				t.Errorf("usage (-json +stream):\n%s", diff)
			}
		})
	}
}

func TestResponsesStreamError(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{ErrorAfter: 2}})
	events, err := streamResponse(t, srv, "k", "/v1/responses", `{"model":"gpt-5","stream":true,"input":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	var ev respEvent
	if err := json.Unmarshal([]byte(last.data), &ev); err != nil || last.name != "error" || ev.Code != "server_error" || *ev.SequenceNumber != len(events)-1 {
		t.Errorf("last event %s %s, want error server_error with the next sequence number", last.name, last.data)
	}
}

// TestPreviousResponseID checks stored responses belong to the key that
// created them: a chained request or a follow-up with another key is 404.
func TestPreviousResponseID(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	first, _ := createResponse(t, srv, "key-a", "/v1/responses", `{"model":"gpt-5","input":"Say hello to the world"}`)
	unstored, _ := createResponse(t, srv, "key-a", "/v1/responses", `{"model":"gpt-5","input":"hi","store":false}`)

	chained, _ := createResponse(t, srv, "key-a", "/v1/responses", `{"model":"gpt-5","previous_response_id":"`+first.ID+`","input":"again"}`)
	if got := chained.Usage.InputTokensDetails.CachedTokens; got != first.Usage.TotalTokens {
		t.Errorf("chained cached_tokens = %d, want the first turn's %d tokens", got, first.Usage.TotalTokens)
	}
	if chained.PreviousResponseID == nil || *chained.PreviousResponseID != first.ID {
		t.Errorf("previous_response_id = %v, want %s", chained.PreviousResponseID, first.ID)
	}
	// Chaining and resending the history are the same conversation.
	resent, _ := createResponse(t, srv, "key-b", "/v1/responses", `{"model":"gpt-5","input":[{"role":"user","content":"Say hello to the world"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"`+first.text()+`"}]},{"role":"user","content":"again"}]}`)
	if resent.text() != chained.text() {
		t.Errorf("resent history answers %q, chained %q: want the same", resent.text(), chained.text())
	}

	tests := []struct {
		name       string
		key        string
		method     string
		path, body string
		wantStatus int
		wantCode   string
	}{
		{"chain with another key", "key-b", "POST", "/v1/responses", `{"model":"gpt-5","previous_response_id":"` + first.ID + `","input":"x"}`, 404, "previous_response_not_found"},
		{"chain onto unknown", "key-a", "POST", "/v1/responses", `{"model":"gpt-5","previous_response_id":"resp_nope","input":"x"}`, 404, "previous_response_not_found"},
		{"chain onto store false", "key-a", "POST", "/v1/responses", `{"model":"gpt-5","previous_response_id":"` + unstored.ID + `","input":"x"}`, 404, "previous_response_not_found"},
		{"compact with another key", "key-b", "POST", "/v1/responses/compact", `{"model":"gpt-5","previous_response_id":"` + first.ID + `"}`, 404, "previous_response_not_found"},
		{"get", "key-a", "GET", "/v1/responses/" + first.ID, "", 200, ""},
		{"get with another key", "key-b", "GET", "/v1/responses/" + first.ID, "", 404, ""},
		{"cancel with another key", "key-b", "POST", "/v1/responses/" + first.ID + "/cancel", "", 404, ""},
		{"cancel in the foreground", "key-a", "POST", "/v1/responses/" + first.ID + "/cancel", "", 400, ""},
		{"delete with another key", "key-b", "DELETE", "/v1/responses/" + first.ID, "", 404, ""},
		{"delete", "key-a", "DELETE", "/v1/responses/" + first.ID, "", 200, ""},
		{"get deleted", "key-a", "GET", "/v1/responses/" + first.ID, "", 404, ""},
		{"get under codex", "key-a", "GET", "/backend-api/codex/responses/" + chained.ID, "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, t.Context(), srv, tt.key, tt.method, tt.path, tt.body)
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				if e := decodeError(t, body); deref(e.Error.Code) != tt.wantCode || e.Error.Type != "invalid_request_error" {
					t.Errorf("error %s, want invalid_request_error %q", body, tt.wantCode)
				}
				return
			}
			var got struct{ ID, Object string }
			if err := json.Unmarshal(body, &got); err != nil || !strings.HasPrefix(got.ID, "resp_") || !strings.HasPrefix(got.Object, "response") {
				t.Errorf("body %s, want a response", body)
			}
		})
	}
}

func TestResponsesCompact(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	resp := post(t, srv, "k", "/v1/responses/compact", `{"model":"gpt-5","input":[{"role":"user","content":"Say hello"}]}`)
	body := readAll(t, resp)
	var got struct {
		Object string
		Output []struct {
			ID               string
			Type             string
			EncryptedContent string `json:"encrypted_content"`
		}
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("compact = %d %s, %v", resp.StatusCode, body, err)
	}
	if got.Object != "response.compaction" || len(got.Output) != 1 || got.Output[0].Type != "compaction" ||
		!strings.HasPrefix(got.Output[0].ID, "cmp_") || got.Output[0].EncryptedContent == "" || got.Usage.InputTokens == 0 {
		t.Errorf("compact = %s, want one compaction item and usage", body)
	}
}

func TestResponsesErrors(t *testing.T) {
	_, srv := start(t, simulator.Options{
		Models: []string{"gpt-5"},
		Keys: map[string]simulator.Behavior{
			"good":    {},
			"limited": {FailStatus: 429, RetryAfter: 1500 * time.Millisecond},
			"broken":  {FailStatus: 500},
		},
		RejectUnknownKeys: true,
	})
	tests := []struct {
		name       string
		key, body  string
		wantStatus int
		wantType   string
		wantCode   string
		wantHdr    map[string]string
	}{
		{"no key", "", `{"model":"gpt-5","input":"hi"}`, 401, "invalid_request_error", "", nil},
		{"unknown key", "sk-other", `{"model":"gpt-5","input":"hi"}`, 401, "invalid_request_error", "invalid_api_key", nil},
		{"unknown model", "good", `{"model":"gpt-9","input":"hi"}`, 404, "invalid_request_error", "model_not_found", nil},
		{"no input", "good", `{"model":"gpt-5"}`, 400, "invalid_request_error", "missing_required_parameter", nil},
		{"rate limited", "limited", `{"model":"gpt-5","input":"hi"}`, 429, "requests", "rate_limit_exceeded",
			map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500", "X-Ratelimit-Remaining-Requests": "0"}},
		{"server error", "broken", `{"model":"gpt-5","input":"hi"}`, 500, "server_error", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv, tt.key, "/v1/responses", tt.body)
			body := readAll(t, resp)
			e := decodeError(t, body)
			if resp.StatusCode != tt.wantStatus || e.Error.Type != tt.wantType || deref(e.Error.Code) != tt.wantCode {
				t.Errorf("answer %d %s, want %d %s %q", resp.StatusCode, body, tt.wantStatus, tt.wantType, tt.wantCode)
			}
			for k, want := range tt.wantHdr {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestBackgroundResponse checks a background response runs like a job:
// queued, then finished when polled later, or cancelled before.
func TestBackgroundResponse(t *testing.T) {
	_, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"slow": {JobDuration: time.Hour},
		"fast": {JobDuration: time.Millisecond},
	}})
	poll := func(key, method, path string) responseObject {
		t.Helper()
		resp := send(t, t.Context(), srv, key, method, path, "")
		body := readAll(t, resp)
		var r responseObject
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s = %d %s, %v", method, path, resp.StatusCode, body, err)
		}
		return r
	}
	const body = `{"model":"gpt-5","input":"Say hello to the world","background":true}`

	slow, _ := createResponse(t, srv, "slow", "/v1/responses", body)
	if slow.Status != "queued" || len(slow.Output) != 0 || slow.Usage != nil {
		t.Errorf("created %s with %d items, usage %v; want queued, no output, no usage", slow.Status, len(slow.Output), slow.Usage)
	}
	if got := poll("slow", "POST", "/v1/responses/"+slow.ID+"/cancel"); got.Status != "cancelled" {
		t.Errorf("cancel = %s, want cancelled", got.Status)
	}
	if got := poll("slow", "GET", "/v1/responses/"+slow.ID); got.Status != "cancelled" {
		t.Errorf("GET after cancel = %s, want cancelled", got.Status)
	}

	fast, _ := createResponse(t, srv, "fast", "/v1/responses", body)
	var done responseObject
	eventually(t, "the background response to complete", func() bool {
		done = poll("fast", "GET", "/v1/responses/"+fast.ID)
		return done.Status == "completed"
	})
	if done.text() == "" || done.Usage == nil || done.Usage.OutputTokens != 16 {
		t.Errorf("completed %+v, want the text and its usage", done)
	}
	if got := poll("fast", "POST", "/v1/responses/"+fast.ID+"/cancel"); got.Status != "completed" {
		t.Errorf("cancel after completion = %s, want it unchanged", got.Status)
	}

	resp := post(t, srv, "fast", "/v1/responses", `{"model":"gpt-5","input":"hi","background":true,"store":false}`)
	if e := decodeError(t, readAll(t, resp)); resp.StatusCode != 400 || deref(e.Error.Param) != "background" {
		t.Errorf("background without store = %d %+v, want 400 on background", resp.StatusCode, e)
	}
}

// A GET with stream=true streams a stored response's events again: all of
// them, or those after starting_after; the stored response is unchanged.
func TestResponseStreamedAgain(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	created, err := streamResponse(t, srv, "k", "/v1/responses", `{"model":"gpt-5","input":"Say hello","stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var first struct{ Response responseObject }
	if err := json.Unmarshal([]byte(created[0].data), &first); err != nil {
		t.Fatal(err)
	}
	get := func(query string) []namedEvent {
		t.Helper()
		resp := send(t, t.Context(), srv, "k", http.MethodGet, "/v1/responses/"+first.Response.ID+query, "")
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET %s = %d %s, want a stream", query, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		evs, err := readNamedEvents(t, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	all := get("?stream=true")
	if len(all) != len(created) || all[len(all)-1].name != "response.completed" {
		t.Fatalf("streamed again: %d events ending %s, want the %d created", len(all), all[len(all)-1].name, len(created))
	}
	if rest := get("?stream=true&starting_after=2"); len(rest) != len(created)-3 || !strings.Contains(rest[0].data, `"sequence_number":3`) {
		t.Errorf("after 2: %d events from %s, want %d from sequence number 3", len(rest), rest[0].data, len(created)-3)
	}
	if got, _ := createResponse(t, srv, "k", "/v1/responses", `{"model":"gpt-5","input":"hi","previous_response_id":"`+first.Response.ID+`"}`); got.Status != "completed" {
		t.Errorf("continuing it after = %+v, want it still stored", got)
	}
}
