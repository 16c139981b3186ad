package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sse"
)

// testProtocols speaks what app's table does, for tests of the Caller.
var testProtocols = &Protocols{
	Dialects: map[sluice.Protocol]*Dialect{
		sluice.ProtocolOpenAIChat: OpenAIChat, sluice.ProtocolOpenAIEmbeddings: OpenAIEmbeddings,
		sluice.ProtocolAnthropic: AnthropicMessages, sluice.ProtocolOpenAIVideos: OpenAIVideos, sluice.ProtocolFalQueue: FalQueue,
		sluice.ProtocolOpenAIResponses: OpenAIResponses,
	},
	Endings: map[sluice.Protocol]*Ending{
		sluice.ProtocolOpenAIChat: OpenAIEnding, sluice.ProtocolOpenAIEmbeddings: OpenAIEnding, sluice.ProtocolAnthropic: AnthropicEnding,
		sluice.ProtocolOpenAIResponses: ResponsesEnding,
	},
}

// Each caller protocol's ending is one whole event its SDKs read as an
// error, with Sluice's code: for a broken stream and for the shutdown.
func TestEndings(t *testing.T) {
	tests := []struct {
		name   string
		ending *Ending
		a      Attempt
		event  string // the event's name; "" for an unnamed one
		code   sluice.Code
	}{
		{"openai failed", OpenAIEnding, Attempt{Class: ClassEndpoint}, "", sluice.CodeUpstreamStreamFailed},
		{"openai shutdown", OpenAIEnding, Attempt{Class: ClassCallerGone, Err: ErrShuttingDown}, "", ErrShuttingDown.Code},
		{"anthropic failed", AnthropicEnding, Attempt{Class: ClassEndpoint}, "error", sluice.CodeUpstreamStreamFailed},
		{"anthropic shutdown", AnthropicEnding, Attempt{Class: ClassCallerGone, Err: ErrShuttingDown}, "error", ErrShuttingDown.Code},
		{"responses failed", ResponsesEnding, Attempt{Class: ClassEndpoint}, "error", sluice.CodeUpstreamStreamFailed},
		{"responses shutdown", ResponsesEnding, Attempt{Class: ClassCallerGone, Err: ErrShuttingDown}, "error", ErrShuttingDown.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := sse.NewReader(bytes.NewReader(streamEnd(tt.a, tt.ending))).Next()
			var body struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
				Code string `json:"code"` // Responses' error event
			}
			if err != nil || string(ev.Name) != tt.event || json.Unmarshal(ev.Data, &body) != nil || body.Error.Code+body.Code != string(tt.code) {
				t.Errorf("ending = %q (%v), want event %q with code %s", ev.Raw, err, tt.event, tt.code)
			}
		})
	}
	if streamEnd(Attempt{Class: ClassCallerGone}, AnthropicEnding) != nil {
		t.Error("a caller that left gets an ending")
	}
}

// failingTranslator passes requests on as they are and fails on the
// upstream's second stream event.
type failingTranslator struct{ events int }

func (t *failingTranslator) Request(req *sluice.Request, model string) ([]byte, error) {
	return PrepareBody(req, model)
}
func (t *failingTranslator) Dropped() []string                    { return nil }
func (t *failingTranslator) Response(body []byte) ([]byte, error) { return body, nil }
func (t *failingTranslator) Error(_ int, body []byte) []byte      { return body }
func (t *failingTranslator) Event(ev adapter.Event, emit func(adapter.Event) error) error {
	if t.events++; t.events == 2 {
		return errors.New("cannot carry this event")
	}
	return emit(adapter.Event{Name: "message_start", Data: []byte(`{"type":"message_start"}`)})
}

// A translator that cannot carry an event of a committed stream ends it
// with the caller's error event, as an endpoint failure (not as a caller
// who left).
func TestTranslatedStreamThatCannotBeCarried(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	p := *testProtocols
	p.Translators = map[Pair]func() adapter.Translator{
		{Caller: sluice.ProtocolAnthropic, Upstream: sluice.ProtocolOpenAIChat}: func() adapter.Translator { return &failingTranslator{} },
	}
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), &p, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
	t.Cleanup(c.Close)
	req := &sluice.Request{ID: "r", Protocol: sluice.ProtocolAnthropic, Model: "gpt-4o-mini", Stream: true,
		Body: []byte(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)}
	w := httptest.NewRecorder()
	a := c.Execute(t.Context(), w, req, testEdge(srv.URL), time.Now(), Hooks{})
	if a.Class != ClassEndpoint || !a.Committed || !strings.HasSuffix(w.Body.String(), string(AnthropicEnding.Failed)) {
		t.Errorf("Execute = class %v, committed %v, %v, wrote %q; want an endpoint failure ending with Anthropic's error event", a.Class, a.Committed, a.Err, w.Body)
	}
}
