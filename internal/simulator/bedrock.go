package simulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Bedrock's runtime, for Anthropic's models: POST
// /model/{modelId}/invoke answers a Messages request as JSON and
// /model/{modelId}/invoke-with-response-stream as an AWS event stream
// (application/vnd.amazon.eventstream) of chunk events, each an Anthropic
// stream event in base64, the last (message_stop) with
// amazon-bedrock-invocationMetrics. The body is a Messages request without
// model and stream, with anthropic_version "bedrock-2023-05-31". Requests
// are signed with AWS Signature Version 4, checked here apart from any AWS
// code against Options.AWSKeys; the access key ID is the key whose
// Behavior applies. Errors are AWS's: the name in x-amzn-ErrorType and
// {"message"}; an error after the 200 is an exception message of the
// stream.

// AWSKey is the secret of an AWS access key the simulator checks
// signatures with, and the session token its requests must carry ("" for
// a long-term key).
type AWSKey struct {
	Secret       string
	SessionToken string
}

// bedrockVersion is the anthropic_version Bedrock requires.
const bedrockVersion = "bedrock-2023-05-31"

// bedrock reports an endpoint of Bedrock's runtime.
func (e endpoint) bedrock() bool { return e == epBedrockInvoke || e == epBedrockStream }

// routeBedrock routes /model/{modelId}/invoke[-with-response-stream].
func routeBedrock(r *http.Request) endpoint {
	rest, ok := strings.CutPrefix(r.URL.Path, "/model/")
	if !ok || r.Method != http.MethodPost {
		return epNone
	}
	switch model, op, _ := strings.Cut(rest, "/"); {
	case model == "":
	case op == "invoke":
		return epBedrockInvoke
	case op == "invoke-with-response-stream":
		return epBedrockStream
	}
	return epNone
}

// bedrockModel is the model ID of a Bedrock path (escaped in the path when
// it is an ARN).
func bedrockModel(r *http.Request) string {
	rest := strings.TrimPrefix(r.URL.Path, "/model/")
	model, _, _ := strings.Cut(rest, "/")
	return model
}

// awsCredential is the parts of a SigV4 Authorization header.
type awsCredential struct {
	keyID, date, region, service string
	signed                       []string
	signature                    string
}

// parseAWSAuthorization reads "AWS4-HMAC-SHA256 Credential=AKID/date/
// region/service/aws4_request, SignedHeaders=a;b, Signature=hex".
func parseAWSAuthorization(h string) (awsCredential, bool) {
	var a awsCredential
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, false
	}
	for part := range strings.SplitSeq(rest, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch name {
		case "Credential":
			scope := strings.Split(value, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return a, false
			}
			a.keyID, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			a.signed = strings.Split(value, ";")
		case "Signature":
			a.signature = value
		}
	}
	return a, a.keyID != "" && a.signature != "" && len(a.signed) > 0
}

// bedrockKeyOf is the access key ID of a signed request.
func bedrockKeyOf(r *http.Request) string {
	a, _ := parseAWSAuthorization(r.Header.Get("Authorization"))
	return a.keyID
}

// maxClockSkew is how far X-Amz-Date may be from now, as AWS allows.
const maxClockSkew = 15 * time.Minute

// bedrockSigned checks the request's signature; when it is wrong it
// answers 403 (UnrecognizedClientException for a key it does not know,
// InvalidSignatureException for a signature that does not match) and
// returns false.
func (c *call) bedrockSigned(keyID string, body []byte) bool {
	r := c.r
	a, _ := parseAWSAuthorization(r.Header.Get("Authorization"))
	key, known := c.sim.awsKeys[keyID]
	date, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	switch {
	case !known:
		c.awsFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	case key.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != key.SessionToken:
		c.awsFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	case err != nil || a.date != date.Format("20060102") || a.service != "bedrock":
		c.awsFail(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires a valid X-Amz-Date and a credential scope of service bedrock.")
		return false
	case time.Since(date).Abs() > maxClockSkew:
		c.awsFail(http.StatusForbidden, "InvalidSignatureException", "Signature expired: "+r.Header.Get("X-Amz-Date")+" is now earlier than the allowed window.")
		return false
	case !slices.Contains(a.signed, "host") || !hmac.Equal([]byte(a.signature), []byte(signV4(r, body, a, key.Secret))):
		c.awsFail(http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
		return false
	}
	return true
}

// signV4 computes the signature of r with body, as AWS Signature Version 4
// defines it for services other than S3 (the path's segments encoded
// twice), over the headers the request says it signed.
func signV4(r *http.Request, body []byte, a awsCredential, secret string) string {
	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	canon.WriteString(awsEscape(r.URL.EscapedPath(), false) + "\n")
	query := r.URL.Query()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range query {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		vs := slices.Sorted(slices.Values(query[k]))
		for j, v := range vs {
			if i > 0 || j > 0 {
				canon.WriteByte('&')
			}
			canon.WriteString(awsEscape(k, true) + "=" + awsEscape(v, true))
		}
	}
	canon.WriteByte('\n')
	for _, name := range a.signed {
		var value string
		switch name {
		case "host":
			value = r.Host
		case "content-length":
			value = strconv.FormatInt(r.ContentLength, 10)
		default:
			vs := r.Header.Values(name)
			for i, v := range vs {
				vs[i] = strings.Join(strings.Fields(v), " ")
			}
			value = strings.Join(vs, ",")
		}
		canon.WriteString(name + ":" + value + "\n")
	}
	payload := sha256.Sum256(body)
	canon.WriteString("\n" + strings.Join(a.signed, ";") + "\n" + hex.EncodeToString(payload[:]))
	request := sha256.Sum256([]byte(canon.String()))
	scope := a.date + "/" + a.region + "/" + a.service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + scope + "\n" + hex.EncodeToString(request[:])
	k := []byte("AWS4" + secret)
	for _, part := range []string{a.date, a.region, a.service, "aws4_request", toSign} {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(part))
		k = m.Sum(nil)
	}
	return hex.EncodeToString(k)
}

// awsEscape is SigV4's URI encoding: every byte but the unreserved ones
// (and '/' in a path) as %XX, upper case.
func awsEscape(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !encodeSlash {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

// parseBedrock reads an InvokeModel body: a Messages request whose model
// is the path's and whose stream is the operation's.
func (c *call) parseBedrock(body []byte) parsed {
	model, err := url.PathUnescape(bedrockModel(c.r))
	if err != nil {
		model = bedrockModel(c.r)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return parsed{model: model, err: c.bedrockInvalid("Malformed input request, please reformat your input and try again.")}
	}
	for _, extra := range []string{"model", "stream"} {
		if _, ok := fields[extra]; ok {
			return parsed{model: model, err: c.bedrockInvalid("Malformed input request: #: extraneous key [" + extra + "] is not permitted, please reformat your input and try again.")}
		}
	}
	if v := string(fields["anthropic_version"]); v != `"`+bedrockVersion+`"` {
		return parsed{model: model, err: c.bedrockInvalid("Malformed input request: #/anthropic_version: expected " + bedrockVersion + ", please reformat your input and try again.")}
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{model: model, err: c.bedrockInvalid("Malformed input request: " + err.Error())}
	}
	req.Model, req.Stream = model, c.ep == epBedrockStream
	req.cached = strings.Contains(string(body), `"cache_control"`)
	p := parsed{model: model, stream: req.Stream, msgs: &req}
	if msg := req.invalid(false); msg != "" {
		p.err = c.bedrockInvalid("Malformed input request: " + msg)
	}
	return p
}

// bedrockInvalid is a 400 ValidationException found while parsing.
func (c *call) bedrockInvalid(msg string) *apiError {
	c.w.Header()["X-Amzn-Errortype"] = []string{"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}
	return &apiError{http.StatusBadRequest, awsMessage(msg)}
}

// awsMessage renders AWS's error body.
func awsMessage(msg string) []byte {
	return append(appendString([]byte(`{"message":`), msg), '}')
}

// awsFail answers an AWS error named name.
func (c *call) awsFail(status int, name, msg string) {
	c.w.Header()["X-Amzn-Errortype"] = []string{name + ":http://internal.amazon.com/coral/com.amazon.bedrock/"}
	c.fail(status, awsMessage(msg))
}

// bedrockFailure is Bedrock's error for an injected status, unless
// Behavior.AWSError names one, with Behavior.FailBody as its message when
// set.
func (c *call) bedrockFailure(status int) {
	name, msg := c.b.AWSError, http.StatusText(status)
	if name == "" {
		switch status {
		case http.StatusTooManyRequests:
			name, msg = "ThrottlingException", "Too many requests, please wait before trying again."
		case http.StatusForbidden:
			name, msg = "AccessDeniedException", "You don't have access to the model with the specified model ID."
		case http.StatusBadRequest:
			name = "ValidationException"
		case http.StatusServiceUnavailable:
			name, msg = "ServiceUnavailableException", "Bedrock is unable to process your request."
		default:
			name = "InternalServerException"
		}
	}
	if c.b.FailBody != "" {
		msg = c.b.FailBody
	}
	c.awsFail(status, name, msg)
}

// bedrockStreamError is the exception that ends a stream for Anthropic's
// mid-stream error event.
const bedrockStreamError = "modelStreamErrorException"

// sendBedrock sends the Anthropic event in st.buf ("event: name\ndata:
// json\n\n") as Bedrock does: a chunk message whose payload holds the
// event in base64; an error event as a stream exception; no pings.
func (st *streamer) sendBedrock() bool {
	event := st.buf
	name, data, _ := strings.Cut(string(event), "\ndata: ")
	name = strings.TrimPrefix(name, "event: ")
	data = strings.TrimSuffix(data, "\n\n")
	var msg []byte
	switch name {
	case "ping":
		return true
	case "error":
		message := "The model stream failed."
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(data), &e) == nil && e.Error.Message != "" {
			message = e.Error.Message
		}
		msg = appendESMessage(nil, [][2]string{{":exception-type", bedrockStreamError}, {":content-type", "application/json"}, {":message-type", "exception"}},
			awsMessage(message))
	default:
		payload := append([]byte(`{"bytes":"`), base64.StdEncoding.AppendEncode(nil, []byte(data))...)
		msg = appendESMessage(nil, [][2]string{{":event-type", "chunk"}, {":content-type", "application/json"}, {":message-type", "event"}},
			append(payload, `"}`...))
	}
	st.buf = msg
	ok := st.write()
	st.buf = event[:0]
	return ok
}

// appendESMessage appends an event stream message with string headers.
func appendESMessage(b []byte, headers [][2]string, payload []byte) []byte {
	var h []byte
	for _, kv := range headers {
		h = append(h, byte(len(kv[0])))
		h = append(h, kv[0]...)
		h = append(h, 7)
		h = binary.BigEndian.AppendUint16(h, uint16(len(kv[1])))
		h = append(h, kv[1]...)
	}
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(16+len(h)+len(payload)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// appendInvocationMetrics appends, to a message_stop event, the metrics
// Bedrock adds to a stream's last event.
func appendInvocationMetrics(b []byte, u anthropicUsage, took time.Duration) []byte {
	b = append(b, `,"amazon-bedrock-invocationMetrics":{"inputTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.input), 10)
	b = append(b, `,"outputTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.output), 10)
	b = append(b, `,"invocationLatency":`...)
	b = strconv.AppendInt(b, took.Milliseconds(), 10)
	b = append(b, `,"firstByteLatency":`...)
	b = strconv.AppendInt(b, took.Milliseconds(), 10)
	b = append(b, `,"cacheReadInputTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.cacheRead), 10)
	b = append(b, `,"cacheWriteInputTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.cacheWrite), 10)
	return append(b, '}')
}
