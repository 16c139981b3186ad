package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const testSecret = "sk-upstream-TEST-0f3c9e2d7b5a41"

func TestScrubError(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "echoed header", give: `{"error":{"message":"bad header Authorization: Bearer ` + testSecret + `"}}`,
			want: `{"error":{"message":"bad header Authorization: Bearer ` + stars(len(testSecret)) + `"}}`},
		{name: "secret alone, twice", give: testSecret + " and " + testSecret, want: stars(len(testSecret)) + " and " + stars(len(testSecret))},
		{name: "another bearer token", give: `got "bearer abc.DEF_123-xyz=" instead`, want: `got "bearer ` + stars(len("abc.DEF_123-xyz=")) + `" instead`},
		{name: "prefixed key", give: `key sk-proj-AbCdEf0123456789 is revoked`, want: `key ` + stars(len("sk-proj-AbCdEf0123456789")) + ` is revoked`},
		{name: "google key", give: `API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv`, want: `API key not valid: ` + stars(len("AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv"))},
		{name: "x-api-key field", give: `{"headers":{"x-api-key":"plain-secret-value"}}`, want: `{"headers":{"x-api-key":"` + stars(len("plain-secret-value")) + `"}}`},
		{name: "api_key query", give: `url ?api_key=abcd1234&x=1`, want: `url ?api_key=` + stars(8) + `&x=1`},
		{name: "authorization field with scheme", give: `"authorization": "Bearer opaque123"`, want: `"authorization": "Bearer ` + stars(9) + `"`},
		{name: "fal key", give: `Authorization: Key 1a2b3c-4d5e:0f9e8d7c`, want: `Authorization: Key ` + stars(len("1a2b3c-4d5e:0f9e8d7c"))},
		{name: "plain error untouched", give: `{"error":{"message":"This model's maximum context length is 8192 tokens; the Bearer of bad news","type":"invalid_request_error","code":"invalid_api_key"}}`,
			want: `{"error":{"message":"This model's maximum context length is 8192 tokens; the Bearer of bad news","type":"invalid_request_error","code":"invalid_api_key"}}`},
		{name: "masked key from the provider", give: `Incorrect API key provided: sk-upst*****5a41.`, want: `Incorrect API key provided: sk-upst*****5a41.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.give)
			scrubError(b, testSecret)
			if string(b) != tt.want {
				t.Errorf("scrubError(%s) = %s, want %s", tt.give, b, tt.want)
			}
		})
	}
}

func stars(n int) string { return strings.Repeat("*", n) }

func TestPassHeaders(t *testing.T) {
	src := http.Header{
		"Content-Type":   {"application/json; note=" + testSecret},
		"Retry-After":    {"Bearer abcdefgh12345"},
		"Retry-After-Ms": {"100"},
		"X-Echo":         {testSecret}, // not passed at all
	}
	tests := []struct {
		name        string
		errorAnswer bool
		want        http.Header
	}{
		{name: "answer: the secret only", want: http.Header{
			"Content-Type": {"application/json; note=" + stars(len(testSecret))}, "Retry-After": {"Bearer abcdefgh12345"}, "Retry-After-Ms": {"100"}}},
		{name: "error: key-shaped too", errorAnswer: true, want: http.Header{
			"Content-Type": {"application/json; note=" + stars(len(testSecret))}, "Retry-After": {"Bearer " + stars(13)}, "Retry-After-Ms": {"100"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := http.Header{}
			passHeaders(dst, src, testSecret, tt.errorAnswer)
			for k, v := range tt.want {
				if got := dst[k]; len(got) != 1 || got[0] != v[0] {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if len(dst) != len(tt.want) {
				t.Errorf("headers = %v, want only %v", dst, tt.want)
			}
		})
	}
	if src["Content-Type"][0] != "application/json; note="+testSecret {
		t.Errorf("the upstream's header was written to")
	}
}

// FuzzMaskSecret checks masking keeps the length and leaves no occurrence
// of a secret (which has no maskByte: masking could make one).
func FuzzMaskSecret(f *testing.F) {
	f.Add("xx"+testSecret+testSecret[:5], "sk-upstream")
	f.Add("aaaa", "aa")
	f.Fuzz(func(t *testing.T, give, secret string) {
		if strings.IndexByte(secret, maskByte) >= 0 {
			return
		}
		b := []byte(give)
		scrubError(b, secret)
		if len(b) != len(give) || (secret != "" && bytes.Contains(b, []byte(secret))) {
			t.Fatalf("masking %q in %q = %q", secret, give, b)
		}
	})
}

// TestScrubErrorEncodedSecret: an error answer that echoes the secret in a
// form its reader decodes loses it: whatever decoding the caller (or a
// translator) applies finds no secret, and the body stays valid JSON.
func TestScrubErrorEncodedSecret(t *testing.T) {
	const secret = "sk-up/stream+TEST-0f3c9e2d7b5a41~é"
	escapeAll := func(s string) string { // every character as \uXXXX
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	jsonString := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	b64 := func(enc *base64.Encoding, prefix string) string {
		return enc.EncodeToString([]byte(prefix + secret + `","x":1}`))
	}
	tests := []struct {
		name   string
		echo   string                       // as it sits in the body's message
		decode func(string) (string, error) // what a reader does to the message
	}{
		{"slash escaped", strings.ReplaceAll(secret, "/", `\/`), nil},
		{"every character escaped", escapeAll(secret), nil},
		{"escaped twice", jsonString(`{"key":"` + escapeAll(secret) + `"}`), func(s string) (string, error) {
			var inner struct{ Key string }
			err := json.Unmarshal([]byte(s), &inner)
			return inner.Key, err
		}},
		{"percent-encoded", url.QueryEscape(secret), url.QueryUnescape},
		{"every byte percent-encoded", percentAll(secret), url.PathUnescape},
		{"percent-encoded then escaped", escapeAll(url.PathEscape(secret)), url.PathUnescape},
		{"base64", b64(base64.StdEncoding, `{"k":"`), base64Decoder(base64.StdEncoding)},
		{"base64 at offset 1", b64(base64.StdEncoding, `{"ke":"`), base64Decoder(base64.StdEncoding)},
		{"base64 at offset 2", b64(base64.StdEncoding, `{"key":"`), base64Decoder(base64.StdEncoding)},
		{"base64 url, unpadded", b64(base64.RawURLEncoding, `{"ke":"`), base64Decoder(base64.RawURLEncoding)},
		{"base64 alone, padded", base64.StdEncoding.EncodeToString([]byte(secret)), base64Decoder(base64.StdEncoding)},
		{"base64 escaped", strings.ReplaceAll(b64(base64.StdEncoding, `{"key":"`), "/", `\/`), base64Decoder(base64.StdEncoding)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"error":{"message":"bad credential ` + tt.echo + ` (ref 42)","type":"invalid_request_error"}}`)
			scrubError(body, secret)
			var got struct{ Error struct{ Message string } }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("scrubbed body is not JSON: %v: %s", err, body)
			}
			msg := got.Error.Message
			if !strings.HasPrefix(msg, "bad credential ") || !strings.HasSuffix(msg, " (ref 42)") {
				t.Errorf("message = %q: more than the echo was masked", msg)
			}
			shown := strings.TrimSuffix(strings.TrimPrefix(msg, "bad credential "), " (ref 42)")
			if tt.decode != nil {
				d, _ := tt.decode(shown) // a masked text may no longer decode: then nothing is shown
				shown = d
			}
			if strings.Contains(shown, secret) || strings.Contains(msg, secret) {
				t.Errorf("the secret survives: body %s decodes to %q", body, shown)
			}
			if !strings.Contains(string(body), "*") {
				t.Errorf("nothing was masked in %s", body)
			}
		})
	}
}

func percentAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// base64Decoder decodes what is left of a masked text, the masked bytes
// taken as 'A's so that the rest still decodes where it was.
func base64Decoder(enc *base64.Encoding) func(string) (string, error) {
	return func(s string) (string, error) {
		b, err := enc.DecodeString(strings.ReplaceAll(s, "*", "A"))
		return string(b), err
	}
}
