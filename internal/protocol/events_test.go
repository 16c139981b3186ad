package protocol_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonvalid"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sse"
)

// eventReaders pairs each protocol's event read (which skims) with its
// whole read, the reference.
var eventReaders = []struct {
	name        string
	event, read protocol.EventFunc
	markers     *protocol.Markers
}{
	{"openai.chat", openai.ChatEvent, openai.ReadChatEvent, openai.ChatEventMarkers},
	{"anthropic.messages", anthropic.Event, anthropic.ReadEvent, anthropic.EventMarkers},
	{"openai.responses", openai.ResponsesEvent, openai.ReadResponsesEvent, openai.ResponsesEventMarkers},
	{"gemini.generate", gemini.Event, gemini.ReadEvent, gemini.EventMarkers},
}

func TestSkim(t *testing.T) {
	tests := []struct {
		name    string
		markers *protocol.Markers
		give    string
		read    bool
		err     error
	}{
		{"chat delta", openai.ChatEventMarkers, `{"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`, false, nil},
		{"chat delta with usage null", openai.ChatEventMarkers, `{"id":"c","choices":[{"delta":{"content":"Hi"}}],"usage" : null}`, false, nil},
		{"chat usage", openai.ChatEventMarkers, `{"id":"c","choices":[],"usage":{"prompt_tokens":3}}`, true, nil},
		{"chat usage after a null one", openai.ChatEventMarkers, `{"usage":null,"x":{"usage":{"prompt_tokens":3}}}`, true, nil},
		{"Gemini's usage name is not chat's", openai.ChatEventMarkers, `{"usageMetadata":{}}`, false, nil},
		{"usage as a value only", openai.ChatEventMarkers, `{"choices":[{"delta":{"content":"usage"}}],"x":"usage"}`, false, nil},
		{"usage inside a string", openai.ChatEventMarkers, `{"choices":[{"delta":{"content":"say \"usage\": 1"}}]}`, false, nil},
		{"blank around the object", openai.ChatEventMarkers, " \r\n{\"id\":\"c\"}\t ", false, nil},
		{"anthropic delta", anthropic.EventMarkers, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"message stop"}}`, false, nil},
		{"anthropic delta quoting a type", anthropic.EventMarkers, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"message_stop\""}}`, false, nil},
		{"anthropic delta whose text is a type (a false hit: read whole)", anthropic.EventMarkers, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"message_stop"}}`, true, nil},
		{"anthropic stop", anthropic.EventMarkers, `{"type": "message_stop"}`, true, nil},
		{"anthropic error", anthropic.EventMarkers, `{"type":"error","error":{"type":"overloaded_error"}}`, true, nil},
		{"error as a key only", openai.ResponsesEventMarkers, `{"type":"response.in_progress","response":{"id":"r","error" :null}}`, false, nil},
		{"responses delta", openai.ResponsesEventMarkers, `{"type":"response.output_text.delta","delta":"Hi"}`, false, nil},
		{"responses completed", openai.ResponsesEventMarkers, `{"type":"response.completed","response":{"usage":{"input_tokens":1}}}`, true, nil},
		{"HTML", openai.ChatEventMarkers, `<!DOCTYPE html><html></html>`, false, protocol.ErrMalformedEvent},
		{"cut short", anthropic.EventMarkers, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`, false, protocol.ErrMalformedEvent},
		{"responses completed, spaced", openai.ResponsesEventMarkers, `{"type" : "response.completed" , "response":{}}`, true, nil},
		{"a type ending as a marker's tail", openai.ResponsesEventMarkers, `{"type":"response.output_text.delta","delta":"x.completed"}`, false, nil},
		{"gemini delta", gemini.EventMarkers, `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],"modelVersion":"m","responseId":"r"}`, false, nil},
		{"gemini last chunk", gemini.EventMarkers, `{"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP","index":0}]}`, true, nil},
		{"gemini usage", gemini.EventMarkers, `{"candidates":[],"usageMetadata":{"promptTokenCount":3}}`, true, nil},
		{"gemini usage null", gemini.EventMarkers, `{"candidates":[],"usageMetadata":null}`, false, nil},
		{"gemini blocked", gemini.EventMarkers, `{"promptFeedback":{"blockReason":"SAFETY"}}`, true, nil},
		{"gemini error, null", gemini.EventMarkers, `{"error" : null}`, true, nil},
		{"gemini error as a value only", gemini.EventMarkers, `{"candidates":[{"content":{"parts":[{"text":"error"}]}}]}`, false, nil},
		{"plain text", openai.ResponsesEventMarkers, `Overloaded`, false, protocol.ErrMalformedEvent},
		{"an array", openai.ChatEventMarkers, `[{"usage":{}}]`, false, protocol.ErrMalformedEvent},
		{"empty", openai.ChatEventMarkers, ``, false, protocol.ErrMalformedEvent},
		{"a brace", openai.ChatEventMarkers, `{`, false, protocol.ErrMalformedEvent},
		{"shaped like an object, not JSON", openai.ChatEventMarkers, `{not json}`, false, protocol.ErrMalformedEvent},
		{"a member cut", anthropic.EventMarkers, `{"type":"message_stop","x":}`, false, protocol.ErrMalformedEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read, err := tt.markers.Skim([]byte(tt.give))
			if read != tt.read || err != tt.err {
				t.Errorf("Skim(%s) = %v, %v; want %v, %v", tt.give, read, err, tt.read, tt.err)
			}
		})
	}
}

// FuzzEventSkimAgreesWithRead checks each dialect's Event, which skims an
// event for its markers, against reading the event whole: for any event
// the whole read accepts, both give the same usage, drop, done and error;
// for one it refuses, the skim refuses it too; and the skim refuses
// whatever is not a JSON object, which the whole read may take when the
// members it picks are whole. The seeds are every event of the simulator's streams in
// each protocol (text, tool calls, thinking, usage, the mid-stream error),
// Gemini's included.
func FuzzEventSkimAgreesWithRead(f *testing.F) {
	for _, ev := range simulatorEvents(f) {
		f.Add(uint8(ev.reader), ev.data, false)
	}
	for _, s := range []string{`{"usage":null}`, `{"usage":{"prompt_tokens":1},"usage":null}`, `{"type":"ping","type":"message_stop"}`,
		`{"type":"message_stop","x":}`, `{"choices":[],"usage":{"prompt_tokens":1}} {}`, `{"type":"error"`, `{} `} {
		f.Add(uint8(0), s, true)
		f.Add(uint8(1), s, false)
		f.Add(uint8(2), s, false)
		f.Add(uint8(3), s, false)
	}
	for _, s := range []string{`{"error":null}`, `{"usageMetadata":null,"candidates":[{"finishReason":null}]}`, `{"x":"finishReason","y":"error"}`,
		`{"promptFeedback":{"blockReason":"OTHER"}}`, `{"type":"response.output_text.delta","delta":".completed\""}`, `{"a":"response.completed"}`} {
		for i := range eventReaders {
			f.Add(uint8(i), s, false)
		}
	}
	from := sluice.Usage{PromptTokens: 5, CompletionTokens: 6, TotalTokens: 11, Measured: true}
	f.Fuzz(func(t *testing.T, dialect uint8, data string, includeUsage bool) {
		d := eventReaders[int(dialect)%len(eventReaders)]
		if d.name == "openai.chat" && data == "[DONE]" {
			return // the end of the stream, which Event reads before anything else
		}
		ev := sse.Event{Data: []byte(data)}
		req := &sluice.Request{IncludeUsage: includeUsage}
		wantU, wantDrop, wantDone, wantErr := d.read(ev, req, from)
		gotU, gotDrop, gotDone, gotErr := d.event(ev, req, from)
		same := gotU == wantU && gotDrop == wantDrop && gotDone == wantDone && gotErr == wantErr
		// The whole read checks only what it picks; the skim refuses
		// whatever is not JSON.
		refusedInvalid := gotErr == protocol.ErrMalformedEvent && !jsonvalid.Valid(ev.Data)
		if !same && !refusedInvalid {
			t.Fatalf("%s event %q: skimmed %+v drop %v done %v err %v; read whole %+v drop %v done %v err %v",
				d.name, data, gotU, gotDrop, gotDone, gotErr, wantU, wantDrop, wantDone, wantErr)
		}
	})
}

// simulatorEvent is the data of an event of the simulator's streams, and
// the index in eventReaders of its protocol's.
type simulatorEvent struct {
	reader int
	data   string
}

// simulatorEvents is every event of the simulator's streams in each
// protocol that Sluice passes through, with its protocol's reader (the
// fuzzer tries it on the others too).
func simulatorEvents(tb testing.TB) []simulatorEvent {
	tb.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	defer sim.Close()
	const tool = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"required"`
	streams := []struct {
		reader          int
		path, key, body string
	}{
		{0, "/v1/chat/completions", "k", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`},
		{0, "/v1/chat/completions", "k", `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + tool + `,"messages":[{"role":"user","content":"hi"}]}`},
		{0, "/v1/chat/completions", "broken", `{"model":"m","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`},
		{1, "/v1/messages", "k", `{"model":"m","stream":true,"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`},
		{1, "/v1/messages", "k", `{"model":"m","stream":true,"max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`},
		{1, "/v1/messages", "broken", `{"model":"m","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`},
		{2, "/v1/responses", "k", `{"model":"m","stream":true,"max_output_tokens":6,"input":"hi"}`},
		{2, "/v1/responses", "k", `{"model":"m","stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"tool_choice":"required","input":"hi"}`},
		{2, "/v1/responses", "broken", `{"model":"m","stream":true,"max_output_tokens":6,"input":"hi"}`},
		{3, "/v1beta/models/m:streamGenerateContent?alt=sse", "k", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":6}}`},
		{3, "/v1beta/models/m:streamGenerateContent?alt=sse", "k", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"object"}}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`},
		{3, "/v1beta/models/m:streamGenerateContent?alt=sse", "broken", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":6}}`},
	}
	sim.SetKey("broken", simulator.Behavior{ErrorAfter: 2})
	var out []simulatorEvent
	for _, s := range streams {
		req, err := http.NewRequest(http.MethodPost, srv.URL+s.path, strings.NewReader(s.body))
		if err != nil {
			tb.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("X-Goog-Api-Key", s.key) // Gemini's
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			tb.Fatalf("POST %s %s = %d %s, want a stream", s.path, s.body, resp.StatusCode, b)
		}
		events := sse.NewReader(resp.Body)
		n := 0
		for {
			ev, err := events.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				tb.Fatalf("%s %s: %v", s.path, s.body, err)
			}
			if ev.Data != nil {
				out = append(out, simulatorEvent{s.reader, string(ev.Data)})
				n++
			}
		}
		resp.Body.Close()
		if n < 2 { // a Gemini tool call comes whole: a call, then the last chunk
			tb.Fatalf("POST %s %s: %d events, want a stream", s.path, s.body, n)
		}
	}
	return out
}
