package upstream

import "testing"

// TestStoredResponseIDs: the id of a stored response is read from a
// Responses answer and from a stream's response.created event; a response
// with store false, another event, another object or a broken one has none.
func TestStoredResponseIDs(t *testing.T) {
	answers := []struct{ give, want string }{
		{`{"id":"resp_1","object":"response","status":"completed","store":true,"usage":{"input_tokens":1}}`, "resp_1"},
		{`{"object":"response","id":"resp_2","status":"completed"}`, "resp_2"}, // store defaults to true
		{`{"id":"resp_3","object":"response","store":false}`, ""},
		{`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`, ""},
		{`{"id":"resp_\u0034","object":"response"}`, ""}, // escaped: not a plain id, not bound
	}
	for _, tt := range answers {
		f, ok := readAnswer([]byte(tt.give))
		if got := storedID(f); !ok || got != tt.want {
			t.Errorf("storedID(%s) = %q, want %q", tt.give, got, tt.want)
		}
	}
	events := []struct{ give, want string }{
		{`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","store":true}}`, "resp_1"},
		{`{"type":"response.created","response":{"id":"resp_2","object":"response","store":false}}`, ""},
		{`{"type":"response.in_progress","response":{"id":"resp_3","object":"response"}}`, ""},
		{`{"type":"response.created","response":{"id":"resp_4","object":"response"`, ""},
	}
	for _, tt := range events {
		if got := createdID([]byte(tt.give)); got != tt.want {
			t.Errorf("createdID(%s) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
