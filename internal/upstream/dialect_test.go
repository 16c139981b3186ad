package upstream

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/sse"
)

// testProtocols speaks what app's table does, for tests of the Caller.
var testProtocols = &Protocols{
	Dialects: map[sluice.Protocol]*Dialect{
		sluice.ProtocolOpenAIChat: OpenAIChat, sluice.ProtocolOpenAIEmbeddings: OpenAIEmbeddings,
		sluice.ProtocolAnthropic: AnthropicMessages, sluice.ProtocolOpenAIVideos: OpenAIVideos, sluice.ProtocolFalQueue: FalQueue,
	},
	Endings: map[sluice.Protocol]*Ending{
		sluice.ProtocolOpenAIChat: OpenAIEnding, sluice.ProtocolOpenAIEmbeddings: OpenAIEnding, sluice.ProtocolAnthropic: AnthropicEnding,
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := sse.NewReader(bytes.NewReader(streamEnd(tt.a, tt.ending))).Next()
			var body struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err != nil || string(ev.Name) != tt.event || json.Unmarshal(ev.Data, &body) != nil || body.Error.Code != string(tt.code) {
				t.Errorf("ending = %q (%v), want event %q with code %s", ev.Raw, err, tt.event, tt.code)
			}
		})
	}
	if streamEnd(Attempt{Class: ClassCallerGone}, AnthropicEnding) != nil {
		t.Error("a caller that left gets an ending")
	}
}
