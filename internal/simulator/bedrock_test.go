//go:build !sluice_fuzz

package simulator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sluicehq/sluice/internal/simulator"
)

const (
	bedrockKeyID  = "AKIDSIMULATOR"
	bedrockSecret = "simulator-secret-access-key"
	bedrockModel  = "anthropic.claude-3-5-haiku-20241022-v1:0"
)

func newBedrockSim(t *testing.T, opts simulator.Options) *httptest.Server {
	t.Helper()
	opts.AWSKeys = map[string]simulator.AWSKey{bedrockKeyID: {Secret: bedrockSecret}, "AKIDTEMP": {Secret: "temp-secret", SessionToken: "session-token"}}
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	return srv
}

// bedrockPost signs a request with the AWS SDK's signer (the simulator
// checks it with its own SigV4) and sends it.
func bedrockPost(t *testing.T, srv *httptest.Server, op, body string, keys aws.Credentials) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/model/"+strings.ReplaceAll(bedrockModel, ":", "%3A")+"/"+op, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), keys, req, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const bedrockBody = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"Hello there"}]}`

var bedrockKeys = aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: bedrockSecret}

func TestBedrockInvoke(t *testing.T) {
	srv := newBedrockSim(t, simulator.Options{})
	resp := bedrockPost(t, srv, "invoke", bedrockBody, bedrockKeys)
	var m message
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d, %v", resp.StatusCode, err)
	}
	if m.Model != bedrockModel || m.Type != "message" || len(m.Content) != 1 || m.Content[0].Text == "" || m.Usage.OutputTokens == 0 {
		t.Errorf("answer = %+v", m)
	}
	if resp.Header.Get("X-Amzn-Requestid") == "" {
		t.Error("no x-amzn-RequestId")
	}
	// Temporary credentials: the session token is signed and checked.
	if resp := bedrockPost(t, srv, "invoke", bedrockBody, aws.Credentials{AccessKeyID: "AKIDTEMP", SecretAccessKey: "temp-secret", SessionToken: "session-token"}); resp.StatusCode != http.StatusOK {
		t.Errorf("temporary credentials: %d", resp.StatusCode)
	}
}

func TestBedrockRefusals(t *testing.T) {
	srv := newBedrockSim(t, simulator.Options{Keys: map[string]simulator.Behavior{
		bedrockKeyID: {FailStatus: http.StatusBadRequest, AWSError: "ServiceQuotaExceededException"},
	}})
	for name, tc := range map[string]struct {
		body      string
		keys      aws.Credentials
		status    int
		errorType string
	}{
		"wrong secret":  {bedrockBody, aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: "wrong"}, 403, "InvalidSignatureException"},
		"unknown key":   {bedrockBody, aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: bedrockSecret}, 403, "UnrecognizedClientException"},
		"session token": {bedrockBody, aws.Credentials{AccessKeyID: "AKIDTEMP", SecretAccessKey: "temp-secret", SessionToken: "other"}, 403, "UnrecognizedClientException"},
		"injected":      {bedrockBody, bedrockKeys, 400, "ServiceQuotaExceededException"},
		"model in body": {`{"model":"x",` + bedrockBody[1:], aws.Credentials{AccessKeyID: "AKIDTEMP", SecretAccessKey: "temp-secret", SessionToken: "session-token"}, 400, "ValidationException"},
		"no version":    {`{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, aws.Credentials{AccessKeyID: "AKIDTEMP", SecretAccessKey: "temp-secret", SessionToken: "session-token"}, 400, "ValidationException"},
	} {
		resp := bedrockPost(t, srv, "invoke", tc.body, tc.keys)
		var e struct{ Message string }
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Message == "" {
			t.Errorf("%s: body: %v", name, err)
		}
		if typ, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":"); resp.StatusCode != tc.status || typ != tc.errorType {
			t.Errorf("%s: %d %s, want %d %s", name, resp.StatusCode, typ, tc.status, tc.errorType)
		}
	}
}

// readFrames reads an event stream's messages: their headers and payloads.
func readFrames(t *testing.T, r io.Reader) (headers []map[string]string, payloads [][]byte) {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		total, hlen := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
		if crc32.ChecksumIEEE(b[:8]) != binary.BigEndian.Uint32(b[8:]) || crc32.ChecksumIEEE(b[:total-4]) != binary.BigEndian.Uint32(b[total-4:]) {
			t.Fatal("bad CRC")
		}
		h, hs := b[12:12+hlen], map[string]string{}
		for len(h) > 0 {
			n := int(h[0])
			name := string(h[1 : 1+n])
			size := int(binary.BigEndian.Uint16(h[2+n:]))
			hs[name] = string(h[4+n : 4+n+size])
			h = h[4+n+size:]
		}
		headers = append(headers, hs)
		payloads = append(payloads, b[12+hlen:total-4])
		b = b[total:]
	}
	return headers, payloads
}

func TestBedrockStream(t *testing.T) {
	srv := newBedrockSim(t, simulator.Options{Keys: map[string]simulator.Behavior{"AKIDTEMP": {ErrorAfter: 2}}})
	resp := bedrockPost(t, srv, "invoke-with-response-stream", bedrockBody, bedrockKeys)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/vnd.amazon.eventstream" {
		t.Fatalf("%d %s", resp.StatusCode, ct)
	}
	headers, payloads := readFrames(t, resp.Body)
	var types []string
	var text strings.Builder
	var last map[string]json.RawMessage
	for i, p := range payloads {
		if headers[i][":message-type"] != "event" || headers[i][":event-type"] != "chunk" {
			t.Fatalf("message %d: headers %v", i, headers[i])
		}
		var chunk struct{ Bytes []byte }
		if err := json.Unmarshal(p, &chunk); err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type  string
			Delta struct{ Text string }
		}
		if err := json.Unmarshal(chunk.Bytes, &ev); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		types = append(types, ev.Type)
		text.WriteString(ev.Delta.Text)
		json.Unmarshal(chunk.Bytes, &last)
	}
	if types[0] != "message_start" || types[len(types)-1] != "message_stop" || strings.Contains(strings.Join(types, ","), "ping") || text.Len() == 0 {
		t.Errorf("event types %v, text %q", types, text.String())
	}
	var metrics struct{ InputTokenCount, OutputTokenCount int }
	if err := json.Unmarshal(last["amazon-bedrock-invocationMetrics"], &metrics); err != nil || metrics.InputTokenCount == 0 || metrics.OutputTokenCount == 0 {
		t.Errorf("invocation metrics %s: %v", last["amazon-bedrock-invocationMetrics"], err)
	}

	// An error after the 200 is an exception message.
	resp = bedrockPost(t, srv, "invoke-with-response-stream", bedrockBody, aws.Credentials{AccessKeyID: "AKIDTEMP", SecretAccessKey: "temp-secret", SessionToken: "session-token"})
	headers, payloads = readFrames(t, resp.Body)
	end := headers[len(headers)-1]
	if end[":message-type"] != "exception" || end[":exception-type"] != "modelStreamErrorException" || !bytes.Contains(payloads[len(payloads)-1], []byte(`"message"`)) {
		t.Errorf("last message: %v %s", end, payloads[len(payloads)-1])
	}
}
