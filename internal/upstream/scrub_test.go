package upstream

import (
	"bytes"
	"net/http"
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
