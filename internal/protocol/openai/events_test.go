package openai

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

func TestResponsesEvents(t *testing.T) {
	usage := `{"input_tokens":146,"input_tokens_details":{"cached_tokens":64},"output_tokens":100,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":246}`
	measured := sluice.Usage{PromptTokens: 146, CompletionTokens: 100, CachedTokens: 64, ReasoningTokens: 8, TotalTokens: 246, Measured: true}
	tests := []struct {
		name    string
		give    string
		want    sluice.Usage
		done    bool
		wantErr error
	}{
		{name: "created", give: `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","usage":null}}`},
		{name: "text delta", give: `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"usage"}`},
		{name: "completed", give: `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":` + usage + `}}`, want: measured, done: true},
		{name: "incomplete", give: `{"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","usage":` + usage + `}}`, want: measured, done: true},
		{name: "completed without usage", give: `{"type":"response.completed","response":{"id":"resp_1"}}`, done: true},
		{name: "unknown event", give: `{"type":"response.something_new"}`},
		{name: "error", give: `{"type":"error","code":"server_error","message":"boom","param":null}`, wantErr: protocol.ErrUpstreamErrorEvent},
		{name: "failed", give: `{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error"}}}`, wantErr: protocol.ErrUpstreamErrorEvent},
		{name: "not JSON", give: `Overloaded`, wantErr: protocol.ErrMalformedEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, drop, done, err := ResponsesEvent(sse.Event{Data: []byte(tt.give)}, &sluice.Request{}, sluice.Usage{})
			if err != tt.wantErr || tt.wantErr == nil && (got != tt.want || drop || done != tt.done) {
				t.Errorf("ResponsesEvent(%s) = %+v, drop %v, done %v, %v; want %+v, done %v, %v", tt.give, got, drop, done, err, tt.want, tt.done, tt.wantErr)
			}
		})
	}
}
