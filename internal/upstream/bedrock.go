package upstream

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Anthropic's models on AWS Bedrock: InvokeModel (POST
// {base}/model/{modelId}/invoke) and its streaming variant
// (/invoke-with-response-stream), whose body is a Messages request without
// "model" and "stream" (the path says both), with
// anthropic_version "bedrock-2023-05-31" and the betas as anthropic_beta in
// the body; the request signed with AWS Signature Version 4 (service
// bedrock) by the AWS SDK's signer; a JSON answer that is Anthropic's; a
// stream in the AWS event stream framing whose chunk events each carry an
// Anthropic stream event in base64; and errors named by the
// x-amzn-ErrorType header with a {"message"} body. Sluice turns the last
// two into Anthropic's (bedrockEvents, bedrockRejection), so every reader
// of Anthropic's stream and errors (the dialect's usage, the translator to
// chat, Classify) serves Bedrock unchanged.
var BedrockAnthropic = Hosted(AnthropicMessages, Hosting{
	URL:       bedrockURL,
	Authorize: func(http.Header, http.Header, string) {}, // SigV4 presents the credential (bedrockSign)
	Finish:    bedrockBody,
	Sign:      bedrockSign,
	Unframe:   bedrockUnframe,
	Rejection: bedrockRejection,
})

// bedrockVersion is the anthropic_version Bedrock's Anthropic models take.
const bedrockVersion = "bedrock-2023-05-31"

// bedrockService is the service name of Bedrock's runtime in a SigV4
// signature.
const bedrockService = "bedrock"

// bedrockURL is the InvokeModel URL of model, streaming or not; "" for a
// token count (Sluice estimates it, as for chat) and a compaction.
func bedrockURL(req *sluice.Request, ep *sluice.Endpoint, model string) string {
	if req.CountTokens || req.Compact {
		return ""
	}
	op := "/invoke"
	if req.Stream {
		op = "/invoke-with-response-stream"
	}
	// A model ID has a ':' (anthropic.claude-…-v1:0), an inference
	// profile's ARN has '/' too: one path segment, escaped.
	return strings.TrimSuffix(ep.BaseURL, "/") + "/model/" + url.PathEscape(model) + op
}

// bedrockBody adapts a Messages body to Bedrock's: "model" and "stream"
// left out, anthropic_version set, and the caller's anthropic-beta header
// (comma-separated flags, possibly repeated) as the anthropic_beta array.
// The other members are kept byte for byte.
func bedrockBody(req *sluice.Request, _ *sluice.Endpoint, _ string, body []byte) ([]byte, error) {
	out := make([]byte, 0, len(body)+64)
	out = append(out, '{')
	err := jsonfield.Fields(body, func(key, value []byte) error {
		switch string(key) {
		case "model", "stream", "anthropic_version", "anthropic_beta":
			return nil
		}
		out = appendMember(out, key, value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, `"anthropic_version":"`+bedrockVersion+`"`...)
	first := true
	for _, v := range req.Header["Anthropic-Beta"] {
		for beta := range strings.SplitSeq(v, ",") {
			if beta = strings.TrimSpace(beta); beta == "" {
				continue
			}
			if first {
				out = append(out, `,"anthropic_beta":[`...)
				first = false
			} else {
				out = append(out, ',')
			}
			out = strconv.AppendQuote(out, beta) // a header value is printable ASCII: Go's quoting is JSON's
		}
	}
	if !first {
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// bedrockSigner signs every Bedrock request; it caches the derived signing
// keys and is safe for concurrent use. It logs nothing (LogSigning is off).
var bedrockSigner = v4.NewSigner()

// bedrockAccept is what a Bedrock stream is asked to be.
var bedrockAccept = []string{"application/vnd.amazon.eventstream"}

// bedrockSign signs r, whose body is whole in memory, with the credential's
// AWS keys for the endpoint's region, and returns what of the credential
// went on the wire (its session token, if any): answers must not show it.
func bedrockSign(r *http.Request, ep *sluice.Endpoint, cr *sluice.Credential) (string, error) {
	if cr.AWS == nil {
		return "", fmt.Errorf("credential %s has no AWS access key", cr.ID)
	}
	if _, ok := r.Header["Accept"]; ok {
		r.Header["Accept"] = bedrockAccept // a stream, asked for as SSE by execute
	}
	sum := sha256.New()
	if r.GetBody != nil {
		body, err := r.GetBody()
		if err != nil {
			return "", err
		}
		_, err = io.Copy(sum, body)
		body.Close()
		if err != nil {
			return "", err
		}
	}
	keys := aws.Credentials{AccessKeyID: cr.AWS.AccessKeyID, SecretAccessKey: cr.Secret, SessionToken: cr.AWS.SessionToken}
	err := bedrockSigner.SignHTTP(r.Context(), keys, r, hex.EncodeToString(sum.Sum(nil)), bedrockService, ep.Host.Region, time.Now())
	return cr.AWS.SessionToken, err
}

// isAWSEventStream reports the media type of Bedrock's streams.
func isAWSEventStream(t string) bool { return t == "application/vnd.amazon.eventstream" }

// bedrockUnframe reads a Bedrock stream as Anthropic's server-sent events.
func bedrockUnframe(h http.Header, body io.Reader) (io.Reader, error) {
	if !hasMediaType(h, isAWSEventStream) {
		return nil, fmt.Errorf("upstream answered a stream with a content type that is not %s", bedrockAccept[0])
	}
	return newBedrockEvents(body), nil
}

// bedrockEvents reads a Bedrock stream and gives its events as the
// server-sent events Anthropic sends: each chunk's event, decoded from
// base64, as "event: {its type}\ndata: {it}\n\n"; an exception (a
// throttle, a model error after the 200) as Anthropic's error event, which
// ends the stream as Anthropic's does.
type bedrockEvents struct {
	json []byte // a chunk's event, decoded; reused
}

// newBedrockEvents reads the Bedrock stream body as Anthropic's
// server-sent events.
func newBedrockEvents(body io.Reader) *reframed {
	dec, b := newESDecoder(body), new(bedrockEvents)
	return &reframed{
		next: func(dst []byte) ([]byte, error) {
			m, err := dec.Next()
			if err != nil {
				return dst, err
			}
			return b.event(m, dst)
		},
		buffered: dec.Buffered,
	}
}

// event appends the server-sent event message m stands for to out; none
// for an event that is not a chunk (AWS may add kinds).
func (b *bedrockEvents) event(m esMessage, out []byte) ([]byte, error) {
	typ, _ := m.Header(":message-type")
	switch string(typ) {
	case "event":
		if kind, _ := m.Header(":event-type"); string(kind) != "chunk" {
			return out, nil
		}
		return b.chunk(m.Payload, out)
	case "exception":
		name, _ := m.Header(":exception-type")
		return appendBedrockError(out, string(name), m.Payload), nil
	case "error":
		// The framing's own error (not the service's): its code and
		// message are headers.
		code, _ := m.Header(":error-code")
		msg, _ := m.Header(":error-message")
		payload, _ := json.Marshal(struct {
			Message string `json:"message"`
		}{string(code) + ": " + string(msg)})
		return appendBedrockError(out, string(code), payload), nil
	}
	return out, errEventStreamMalformed
}

// chunk appends the event of a chunk, whose payload is {"bytes":"<base64>"}.
func (b *bedrockEvents) chunk(payload, out []byte) ([]byte, error) {
	s, e, ok, err := jsonfield.Find(payload, "bytes")
	if err != nil || !ok || e-s < 2 || payload[s] != '"' {
		return out, protocol.ErrMalformedEvent
	}
	encoded := payload[s+1 : e-1] // base64 has no character JSON escapes
	b.json = b.json[:0]
	if need := base64.StdEncoding.DecodedLen(len(encoded)); cap(b.json) < need {
		b.json = make([]byte, 0, need)
	}
	n, err := base64.StdEncoding.Decode(b.json[:cap(b.json)], encoded)
	if err != nil {
		return out, protocol.ErrMalformedEvent
	}
	event := b.json[:n]
	name := []byte("message")
	if s, e, ok, err := jsonfield.Find(event, "type"); err == nil && ok && e-s >= 2 && event[s] == '"' {
		name = event[s+1 : e-1]
	}
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, '\n')
	return appendData(out, event), nil
}

// appendData appends data as the data lines of an event, and the blank line
// that ends it: one line per line of data (JSON may be pretty-printed).
func appendData(out, data []byte) []byte {
	for {
		i := 0
		for i < len(data) && data[i] != '\n' && data[i] != '\r' {
			i++
		}
		out = append(out, "data: "...)
		out = append(out, data[:i]...)
		out = append(out, '\n')
		if i == len(data) {
			return append(out, '\n')
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// bedrockError is how Sluice reads one of Bedrock's errors: the status and
// Anthropic's error type that stand for it, so that Classify, the
// translators and an Anthropic caller read it as Anthropic's
// (docs/failure-classes.md for the classes).
type bedrockError struct {
	status int
	typ    string
}

// bedrockErrors are Bedrock runtime's errors by name, lower case (the
// x-amzn-ErrorType header capitalises them, a stream's exception does not).
// The status is the class's, not always Bedrock's: ServiceQuotaExceeded (a
// 400) is a throttle, ModelNotReady (a 429) and ModelError (424) are the
// endpoint's.
var bedrockErrors = map[string]bedrockError{
	"throttlingexception":                 {http.StatusTooManyRequests, "rate_limit_error"},
	"servicequotaexceededexception":       {http.StatusTooManyRequests, "rate_limit_error"},
	"accessdeniedexception":               {http.StatusForbidden, "permission_error"},
	"unrecognizedclientexception":         {http.StatusForbidden, "authentication_error"},
	"invalidsignatureexception":           {http.StatusForbidden, "authentication_error"},
	"incompletesignatureexception":        {http.StatusForbidden, "authentication_error"},
	"missingauthenticationtokenexception": {http.StatusForbidden, "authentication_error"},
	"expiredtokenexception":               {http.StatusForbidden, "authentication_error"},
	"modelnotreadyexception":              {http.StatusServiceUnavailable, "overloaded_error"},
	"serviceunavailableexception":         {http.StatusServiceUnavailable, "overloaded_error"},
	"internalserverexception":             {http.StatusInternalServerError, "api_error"},
	"modelstreamerrorexception":           {http.StatusInternalServerError, "api_error"},
	"modelerrorexception":                 {http.StatusInternalServerError, "api_error"},
	"modeltimeoutexception":               {http.StatusGatewayTimeout, "timeout_error"},
	"validationexception":                 {http.StatusBadRequest, "invalid_request_error"},
	"resourcenotfoundexception":           {http.StatusNotFound, "not_found_error"},
}

// bedrockErrorOf reads an error's name ("ThrottlingException", maybe
// followed by ":" and a namespace URL), or, for a name Sluice does not
// know, the status Bedrock answered with.
func bedrockErrorOf(name string, status int) bedrockError {
	name, _, _ = strings.Cut(name, ":")
	if e, ok := bedrockErrors[strings.ToLower(strings.TrimSpace(name))]; ok {
		return e
	}
	switch {
	case status == http.StatusTooManyRequests:
		return bedrockError{status, "rate_limit_error"}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return bedrockError{status, "authentication_error"}
	case status >= 500 || status == 0:
		return bedrockError{max(status, http.StatusInternalServerError), "api_error"}
	}
	return bedrockError{status, "invalid_request_error"}
}

// appendAnthropicError appends Anthropic's error object for the Bedrock
// error name with payload ({"message"}), whose message is kept.
func appendAnthropicError(out []byte, typ string, payload []byte) []byte {
	out = append(out, `{"type":"error","error":{"type":"`...)
	out = append(out, typ...)
	out = append(out, `","message":`...)
	if s, e, ok, err := jsonfield.Find(payload, "message"); err == nil && ok && payload[s] == '"' {
		out = append(out, payload[s:e]...)
	} else {
		out = append(out, `"the upstream failed"`...)
	}
	return append(out, "}}"...)
}

// appendBedrockError appends the error event that stands for a stream's
// exception.
func appendBedrockError(out []byte, name string, payload []byte) []byte {
	out = append(out, "event: error\ndata: "...)
	out = appendAnthropicError(out, bedrockErrorOf(name, 0).typ, payload)
	return append(out, "\n\n"...)
}

// bedrockRejection rewrites Bedrock's error answer as Anthropic's: the
// status of its class and Anthropic's envelope with Bedrock's message.
func bedrockRejection(status int, h http.Header, body []byte) (int, []byte) {
	e := bedrockErrorOf(h.Get("X-Amzn-Errortype"), status)
	return e.status, appendAnthropicError(nil, e.typ, body)
}
