package upstream

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Bedrock's errors, named by x-amzn-ErrorType with Bedrock's status, are
// classified by their name: never by the status alone.
func TestBedrockErrorsClassified(t *testing.T) {
	for _, tc := range []struct {
		status int
		name   string
		want   Class
	}{
		{429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", ClassRate},
		{400, "ServiceQuotaExceededException", ClassRate},
		{403, "AccessDeniedException", ClassAuth},
		{403, "UnrecognizedClientException", ClassAuth},
		{403, "InvalidSignatureException", ClassAuth},
		{403, "ExpiredTokenException", ClassAuth},
		{429, "ModelNotReadyException", ClassEndpoint},
		{503, "ServiceUnavailableException", ClassEndpoint},
		{500, "InternalServerException", ClassEndpoint},
		{424, "ModelErrorException", ClassEndpoint},
		{408, "ModelTimeoutException", ClassEndpoint},
		{400, "ValidationException", ClassRequest},
		{404, "ResourceNotFoundException", ClassRequest},
		{502, "", ClassEndpoint},
		{429, "SomethingNewException", ClassRate},
	} {
		h := http.Header{"X-Amzn-Errortype": {tc.name}}
		status, body := bedrockRejection(tc.status, h, []byte(`{"message":"what \"Bedrock\" said"}`))
		if got := Classify(status, body); got != tc.want {
			t.Errorf("%d %s: %v (as %d %s), want %v", tc.status, tc.name, got, status, body, tc.want)
		}
		if !bytes.Contains(body, []byte(`"message":"what \"Bedrock\" said"`)) || !bytes.HasPrefix(body, []byte(`{"type":"error","error":{"type":"`)) {
			t.Errorf("%s: body %s, want Anthropic's envelope with Bedrock's message", tc.name, body)
		}
	}
}

// An AccessDeniedException that says the AWS account has no valid payment
// method (a Marketplace model's subscription) is the account's billing,
// not the credential's access.
func TestBedrockPaymentDeniedIsBilling(t *testing.T) {
	h := http.Header{"X-Amzn-Errortype": {"AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"}}
	status, body := bedrockRejection(403, h, []byte(`{"message":"Model access is denied due to INVALID_PAYMENT_INSTRUMENT:A valid payment instrument must be provided.. Your AWS Marketplace subscription for this model cannot be completed at this time."}`))
	if got := Classify(status, body); got != ClassBilling {
		t.Errorf("payment denied: %v (as %d %s), want billing", got, status, body)
	}
}

func TestBedrockBodyAndURL(t *testing.T) {
	req := &sluice.Request{Stream: true, Header: http.Header{"Anthropic-Beta": {"a-2025, b-2025", "c"}},
		Body: []byte(`{"model":"claude","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)}
	body, err := bedrockBody(req, nil, "", req.Body)
	want := `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["a-2025","b-2025","c"]}`
	if err != nil || string(body) != want {
		t.Errorf("body = %s, %v\nwant %s", body, err, want)
	}
	ep := &sluice.Endpoint{BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com/"}
	if u := bedrockURL(req, ep, "arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude-v1:0"); u != "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn:aws:bedrock:us-east-1:123:inference-profile%2Fus.anthropic.claude-v1:0/invoke-with-response-stream" {
		t.Errorf("URL = %s", u)
	}
	if u := bedrockURL(&sluice.Request{CountTokens: true}, ep, "m"); u != "" {
		t.Errorf("count URL = %q, want none (estimated)", u)
	}
}

// A Bedrock stream reads as Anthropic's server-sent events: the chunk's
// event under its type, an exception as an error event; messages that
// arrived together in one Read.
func TestBedrockEventsAsSSE(t *testing.T) {
	stream := append(unhex(t, goldenChunk), unhex(t, goldenThrottle)...)
	got, err := io.ReadAll(iotest.OneByteReader(newBedrockEvents(bytes.NewReader(stream))))
	want := "event: message_stop\ndata: {\"type\":\"message_stop\",\"amazon-bedrock-invocationMetrics\":{\"inputTokenCount\":12,\"outputTokenCount\":3}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Too many requests, please wait before trying again.\"}}\n\n"
	if err != nil || string(got) != want {
		t.Fatalf("events = %q, %v\nwant %q", got, err, want)
	}
	r := newBedrockEvents(bytes.NewReader(stream))
	p := make([]byte, 4096)
	if n, err := r.Read(p); err != nil || string(p[:n]) != want {
		t.Errorf("one Read = %q, %v; want both events", p[:n], err)
	}
	// A chunk whose payload is not what Bedrock sends fails the stream.
	bad := encodeES([]esHeader{stringHeader(":message-type", "event"), stringHeader(":event-type", "chunk")}, []byte(`{"bytes":"!!"}`))
	if _, err := io.ReadAll(newBedrockEvents(bytes.NewReader(bad))); err != protocol.ErrMalformedEvent {
		t.Errorf("bad chunk: %v", err)
	}
	if !strings.Contains(string(appendData(nil, []byte("{\n\"a\":1\r\n}"))), "data: {\ndata: \"a\":1\ndata: }\n\n") {
		t.Error("pretty-printed JSON is not one data line per line")
	}
}
