package ingress

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/upstream"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		protocol sluice.Protocol
		give     string
		want     sluice.Request // Body is not compared
		wantCode sluice.Code    // "" = success
	}{
		{name: "chat", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"fast","messages":[]}`, want: sluice.Request{Model: "fast"}},
		{name: "stream", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"fast","stream":true}`, want: sluice.Request{Model: "fast", Stream: true}},
		{name: "stream usage", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, want: sluice.Request{Model: "m", Stream: true, IncludeUsage: true}},
		{name: "user", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"u-1"}`, want: sluice.Request{Model: "m", User: "u-1"}},
		{name: "embeddings", protocol: sluice.ProtocolOpenAIEmbeddings, give: `{"model":"e","input":"x"}`, want: sluice.Request{Model: "e"}},
		{name: "malformed", protocol: sluice.ProtocolOpenAIChat, give: `{"model":`, wantCode: sluice.CodeInvalidRequest},
		{name: "trailing garbage", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m"} x`, wantCode: sluice.CodeInvalidRequest},
		{name: "array", protocol: sluice.ProtocolOpenAIChat, give: `[1]`, wantCode: sluice.CodeInvalidRequest},
		{name: "empty", protocol: sluice.ProtocolOpenAIChat, give: ``, wantCode: sluice.CodeInvalidRequest},
		{name: "no model", protocol: sluice.ProtocolOpenAIChat, give: `{"messages":[]}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model not a string", protocol: sluice.ProtocolOpenAIChat, give: `{"model":7}`, wantCode: sluice.CodeInvalidRequest},
		{name: "stream not a bool", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","stream":"yes"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "embedding stream", protocol: sluice.ProtocolOpenAIEmbeddings, give: `{"model":"e","stream":true}`, wantCode: sluice.CodeInvalidRequest},
		{name: "video stream", protocol: sluice.ProtocolOpenAIVideos, give: `{"model":"v","stream":true}`, wantCode: sluice.CodeInvalidRequest},
		{name: "repeated model", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"o1-pro","model":"capsame"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model in another case", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"o1-pro","Model":"capsame"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model only in another case", protocol: sluice.ProtocolOpenAIChat, give: `{"MODEL":"capsame"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "escaped model key", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"o1-pro","mod\u0065l":"capsame"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model key cut at NUL", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"capsame","model\u0000":"o1-pro"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "long s", protocol: sluice.ProtocolOpenAIChat, give: "{\"model\":\"m\",\"\u017ftream\":true}", wantCode: sluice.CodeInvalidRequest},
		{name: "Kelvin sign", protocol: sluice.ProtocolOpenAIChat, give: "{\"model\":\"m\",\"max_to\u212aens\":1}", wantCode: sluice.CodeInvalidRequest},
		{name: "ligature", protocol: sluice.ProtocolOpenAIChat, give: "{\"model\":\"m\",\"\ufb06ream\":true}", wantCode: sluice.CodeInvalidRequest},
		{name: "repeated user", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"a","User":"b"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "repeated include_usage", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","stream":true,"stream_options":{"include_usage":false,"Include_usage":true}}`, wantCode: sluice.CodeInvalidRequest},
		{name: "service tier", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","service_tier":"flex"}`, want: sluice.Request{Model: "m", ServiceTier: "flex"}},
		{name: "service tier, escaped", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","service_tier":"fl\u0065x"}`, want: sluice.Request{Model: "m", ServiceTier: "flex"}},
		{name: "repeated service_tier", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","service_tier":"flex","Service_tier":"priority"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "repeated max_completion_tokens", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","max_completion_tokens":1,"max_completion_tokens":2}`, wantCode: sluice.CodeInvalidRequest},
		{name: "escaped value is fine", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"\u0066ast","Messages":[]}`, want: sluice.Request{Model: "fast"}},
		{name: "model with a lone surrogate", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"a\ud800"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "model with invalid UTF-8", protocol: sluice.ProtocolOpenAIChat, give: "{\"model\":\"a\xff\"}", wantCode: sluice.CodeInvalidRequest},
		{name: "negative max_tokens", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","max_tokens":-1}`, wantCode: sluice.CodeInvalidRequest},
		{name: "negative max_completion_tokens", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","max_completion_tokens":-5}`, wantCode: sluice.CodeInvalidRequest},
		{name: "user with a control character", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"a\u0001b"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "user with a tab", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"a\tb"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "user too long", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"` + strings.Repeat("u", config.MaxUser+1) + `"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "user at the limit", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"` + strings.Repeat("u", config.MaxUser) + `"}`, want: sluice.Request{Model: "m", User: strings.Repeat("u", config.MaxUser)}},
		{name: "user in another script", protocol: sluice.ProtocolOpenAIChat, give: `{"model":"m","user":"José 山田"}`, want: sluice.Request{Model: "m", User: "José 山田"}},
		{name: "anthropic", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","max_tokens":64,"stream":true,"metadata":{"user_id":"u-1"},"messages":[]}`,
			want: sluice.Request{Model: "claude", Stream: true, User: "u-1"}},
		{name: "anthropic user is metadata.user_id, not user", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","user":"not-this"}`, want: sluice.Request{Model: "claude"}},
		{name: "anthropic null metadata", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","metadata":null}`, want: sluice.Request{Model: "claude"}},
		{name: "anthropic escaped user_id (encoding/json)", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","metadata":{"user_id":"u-\u0031"}}`, want: sluice.Request{Model: "claude", User: "u-1"}},
		{name: "anthropic repeated user_id", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","metadata":{"user_id":"a","User_id":"b"}}`, wantCode: sluice.CodeInvalidRequest},
		{name: "anthropic repeated metadata", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","metadata":{},"metadata":{"user_id":"b"}}`, wantCode: sluice.CodeInvalidRequest},
		{name: "anthropic model in another case", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","Model":"other"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "anthropic user_id with a control character", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","metadata":{"user_id":"a\u0001"}}`, wantCode: sluice.CodeInvalidRequest},
		{name: "responses", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","input":"hi","stream":true,"max_output_tokens":64,"user":"u-1","prompt_cache_key":"conv-1","previous_response_id":"resp_1"}`,
			want: sluice.Request{Model: "gpt", Stream: true, User: "u-1", MaxTokens: 64, PromptCacheKey: "conv-1", PreviousResponseID: "resp_1"}},
		{name: "responses safety_identifier before user", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","user":"old","safety_identifier":"u-2"}`, want: sluice.Request{Model: "gpt", User: "u-2"}},
		{name: "responses escaped hints (encoding/json)", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","prompt_cache_key":"c\u0031","previous_response_id":"r\u0031"}`,
			want: sluice.Request{Model: "gpt", PromptCacheKey: "c1", PreviousResponseID: "r1"}},
		{name: "responses repeated previous_response_id", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","previous_response_id":"a","previous_response_id":"b"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "responses prompt_cache_key in another case", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","prompt_cache_key":"a","Prompt_cache_key":"b"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "responses escaped safety_identifier key", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","safety_identifi\u0065r":"b"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "responses safety_identifier with a control character", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","safety_identifier":"a\u0001"}`, wantCode: sluice.CodeInvalidRequest},
		{name: "responses negative max_output_tokens", protocol: sluice.ProtocolOpenAIResponses, give: `{"model":"gpt","max_output_tokens":-1}`, wantCode: sluice.CodeInvalidRequest},
		{name: "anthropic negative max_tokens", protocol: sluice.ProtocolAnthropic, give: `{"model":"claude","max_tokens":-1}`, wantCode: sluice.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.protocol, []byte(tt.give))
			if tt.wantCode != "" {
				if !errors.Is(err, &sluice.Error{Code: tt.wantCode}) {
					t.Fatalf("Parse(%s) error = %v, want code %s", tt.give, err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", tt.give, err)
			}
			if got.Model != tt.want.Model || got.Stream != tt.want.Stream || got.IncludeUsage != tt.want.IncludeUsage || got.User != tt.want.User || string(got.Body) != tt.give ||
				got.MaxTokens != tt.want.MaxTokens && tt.protocol == sluice.ProtocolOpenAIResponses ||
				got.PromptCacheKey != tt.want.PromptCacheKey || got.PreviousResponseID != tt.want.PreviousResponseID {
				t.Errorf("Parse(%s) = %+v, want %+v with the body kept", tt.give, *got, tt.want)
			}
		})
	}
}

// FuzzParse checks the ingress parser never panics, and that it either
// accepts a body with a model or refuses it with invalid_request.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"model":"fast","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, `{"model":`, `[1]`, ``, `{"model":7}`, `{"model":"a","model":"b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		req, err := Parse(sluice.ProtocolOpenAIChat, []byte(give))
		if err != nil {
			if !errors.Is(err, &sluice.Error{Code: sluice.CodeInvalidRequest}) {
				t.Fatalf("Parse(%q) error = %v, want invalid_request", give, err)
			}
			return
		}
		if req.Model == "" || string(req.Body) != give {
			t.Fatalf("Parse(%q) = %+v: accepted without a model or changed the body", give, req)
		}
	})
}

// TestParseSubmitForm checks a video submit sent as a multipart form: the
// model is one plain form field, or the body is refused.
func TestParseSubmitForm(t *testing.T) {
	part := func(disposition, value string) string {
		return "--b\r\nContent-Disposition: " + disposition + "\r\n\r\n" + value + "\r\n"
	}
	const prompt = `form-data; name="prompt"`
	tests := []struct {
		name      string
		give      string
		wantModel string // "" = refused with invalid_request
	}{
		{name: "model", give: part(`form-data; name="model"`, "sora-2") + part(prompt, "a cat"), wantModel: "sora-2"},
		{name: "file with an extended filename", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name="ref"; filename*=utf-8''a.png`, "png"), wantModel: "sora-2"},
		{name: "no model", give: part(prompt, "a cat")},
		{name: "model twice", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name="model"`, "sora-2-pro")},
		{name: "model in another case", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name="Model"`, "sora-2-pro")},
		{name: "model as a file", give: part(`form-data; name="model"; filename="m.txt"`, "sora-2-pro") + part(`form-data; name="model"`, "sora-2")},
		{name: "name*", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name="x"; name*=utf-8''model`, "sora-2-pro")},
		{name: "name continuation", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name*0="mo"; name*1="del"`, "sora-2-pro")},
		{name: "two names", give: part(`form-data; name="model"`, "sora-2") + part(`form-data; name="model"; name="model"`, "sora-2-pro")},
		{name: "two dispositions", give: part(`form-data; name="model"`, "sora-2") +
			"--b\r\nContent-Disposition: form-data; name=\"x\"\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsora-2-pro\r\n"},
		{name: "model not UTF-8", give: part(`form-data; name="model"`, "sora\xff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &sluice.Request{Protocol: sluice.ProtocolOpenAIVideos}
			err := parseSubmit(req, []byte(tt.give+"--b--\r\n"), "multipart/form-data; boundary=b", "")
			if tt.wantModel == "" {
				if !errors.Is(err, &sluice.Error{Code: sluice.CodeInvalidRequest}) {
					t.Errorf("parseSubmit(%q) = %v, model %q; want invalid_request", tt.give, err, req.Model)
				}
				return
			}
			if err != nil || req.Model != tt.wantModel {
				t.Errorf("parseSubmit(%q) = %v, model %q; want model %q", tt.give, err, req.Model, tt.wantModel)
			}
		})
	}
}

// reader is how some JSON reader finds a top-level member: which keys it
// takes for a field name, and which of several it keeps.
type reader struct {
	name  string
	match func(key, field string) bool // key unescaped
	pick  string                       // "first", "last" or "strict" (exactly one, else it refuses the body)
}

// readers are the JSON readers an upstream may use: exact keys
// (Python's json, JavaScript's JSON.parse, pydantic), encoding/json's
// Unicode case folding, lower-casing as case-insensitive Python and
// JavaScript code does, and C readers that end a key at NUL; each keeping
// the first member, the last, or refusing duplicates.
var readers = func() []reader {
	matchers := []struct {
		name  string
		match func(key, field string) bool
	}{
		{"exact", func(k, f string) bool { return k == f }},
		{"fold", strings.EqualFold},
		{"lower or upper", func(k, f string) bool { // Python's key.lower() == f or key.upper() == F
			upper := strings.ToUpper(k)
			return strings.ToLower(k) == f || upper == strings.ToUpper(f)
		}},
		{"C string", func(k, f string) bool { k, _, _ = strings.Cut(k, "\x00"); return k == f }},
	}
	var out []reader
	for _, m := range matchers {
		for _, pick := range []string{"first", "last", "strict"} {
			out = append(out, reader{name: m.name + "/" + pick, match: m.match, pick: pick})
		}
	}
	return out
}()

// read returns the raw value r reads for field in obj, valid JSON; ok is
// false when it finds none or, strict, more than one.
func (r reader) read(t *testing.T, obj []byte, field string) (value []byte, ok bool) {
	t.Helper()
	n := 0
	err := jsonfield.Members(obj, func(key, v []byte) error {
		var k string
		if err := json.Unmarshal([]byte(`"`+string(key)+`"`), &k); err != nil {
			return err
		}
		if !r.match(k, field) {
			return nil
		}
		n++
		if r.pick != "first" || n == 1 {
			value = v
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reader %s: %v", r.name, err)
	}
	return value, n == 1 || n > 1 && r.pick != "strict"
}

// FuzzReadersAgree checks the rule of readFields: for any body Parse
// admits, every reader reads the model and stream Sluice read; and once
// PrepareBody has written a deployment's model, every reader reads that
// model, the same stream, and include_usage on a stream.
func FuzzReadersAgree(f *testing.F) {
	for _, s := range []string{`{"model":"fast","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"a","model":"b"}`, `{"model":"a","Model":"b"}`, `{"mod\u0065l":"a","model":"b"}`, `{"model":"a","model\u0000":"b"}`,
		"{\"model\":\"m\",\"\u017ftream\":true,\"stream\":false}", `{"model":"\u0064","stream":false,"stream_options":{"Include_usage":false}}`,
		`{"model":"m","stream":true,"stream_options":{"x":1}}`, `{"model":"m","stream":null}`, `{"model":"m","model":null}`} {
		f.Add(s, "deploy-1")
		f.Add(s, "m")
	}
	f.Fuzz(func(t *testing.T, give, deployment string) {
		req, err := Parse(sluice.ProtocolOpenAIChat, []byte(give))
		if err != nil || deployment == "" || !utf8.ValidString(deployment) {
			return // a catalog's model names are valid UTF-8
		}
		check := func(stage string, body []byte, model string, includeUsage bool) {
			for _, r := range readers {
				raw, ok := r.read(t, body, "model")
				var got string
				if !ok || json.Unmarshal(raw, &got) != nil || got != model {
					t.Fatalf("%s: reader %s reads model %s (found %v) in %q, want %q", stage, r.name, raw, ok, body, model)
				}
				raw, ok = r.read(t, body, "stream")
				stream := false
				if ok && json.Unmarshal(raw, &stream) != nil || stream != req.Stream {
					t.Fatalf("%s: reader %s reads stream %s in %q, want %v", stage, r.name, raw, body, req.Stream)
				}
				raw, ok = r.read(t, body, "stream_options")
				usage := false
				if ok && string(raw) != "null" {
					raw, ok = r.read(t, raw, "include_usage")
					if ok && json.Unmarshal(raw, &usage) != nil {
						t.Fatalf("%s: reader %s reads include_usage %s in %q", stage, r.name, raw, body)
					}
				}
				if usage != includeUsage {
					t.Fatalf("%s: reader %s reads include_usage %v in %q, want %v", stage, r.name, usage, body, includeUsage)
				}
			}
		}
		check("admitted", req.Body, req.Model, req.IncludeUsage)
		body, err := upstream.PrepareBody(req, deployment)
		if err != nil {
			t.Fatalf("PrepareBody(%q, %q) error = %v", give, deployment, err)
		}
		check("prepared", body, deployment, req.IncludeUsage || req.Stream)
	})
}

// TestScan checks which bodies the scan reads itself and which it leaves to
// encoding/json: the bodies clients send must not take the slow path.
func TestScan(t *testing.T) {
	tests := []struct {
		name string
		give string
		want fields // compared when the scan takes the body
		ok   bool
	}{
		{name: "chat", give: `{"model":"m","messages":[{"role":"user","content":"h\u00e9"}],"max_tokens":100,"user":"u"}`,
			want: fields{Model: "m", MaxTokens: 100, User: "u"}, ok: true},
		{name: "stream with usage", give: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":5}`,
			want: fields{Model: "m", Stream: true, IncludeUsage: true, MaxCompletionTokens: 5}, ok: true},
		{name: "null leaves a field", give: `{"model":"a","stream":null,"user":null,"max_tokens":null,"stream_options":null}`, want: fields{Model: "a"}, ok: true},
		{name: "repeated model", give: `{"model":"a","model":"b"}`},
		{name: "repeated null", give: `{"model":"a","model":null}`},
		{name: "repeated stream", give: `{"model":"a","stream":true,"stream":false}`},
		{name: "repeated options", give: `{"model":"m","stream_options":{},"stream_options":null}`},
		{name: "repeated option", give: `{"model":"m","stream_options":{"include_usage":true,"include_usage":false}}`},
		{name: "other keys may repeat", give: `{"model":"m","n":1,"n":2}`, want: fields{Model: "m"}, ok: true},
		{name: "upper case key", give: `{"Model":"m"}`},
		{name: "escaped key", give: `{"mod\u0065l":"m"}`},
		{name: "escaped model", give: `{"model":"\u006d"}`},
		{name: "invalid UTF-8 in model", give: "{\"model\":\"\xff\"}"},
		{name: "wrong type", give: `{"model":"m","stream":1}`},
		{name: "fractional max_tokens", give: `{"model":"m","max_tokens":1.0}`},
		{name: "options not an object", give: `{"model":"m","stream_options":[]}`},
		{name: "upper case option", give: `{"model":"m","stream_options":{"Include_usage":true}}`},
		{name: "invalid JSON", give: `{"model":"m",}`},
		{name: "not an object", give: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := scan([]byte(tt.give), openAIFields)
			if ok != tt.ok || ok && got != tt.want {
				t.Errorf("scan(%s) = %+v, %v; want %+v, %v", tt.give, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzScanMatchesDecode checks the scan against encoding/json: a body the
// scan takes, encoding/json takes too, with the same fields.
func FuzzScanMatchesDecode(f *testing.F) {
	for _, s := range []string{`{"model":"fast","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"a","model":null,"stream_options":{"include_usage":true},"stream_options":{}}`, `{"model":"m","max_tokens":-9223372036854775808}`,
		`{"model":"m","max_tokens":1e2}`, `{"MODEL":"m"}`, `{"model":"m","user":"\u00e9"}`, `[1]`, ``, `{"model":7}`} {
		f.Add(s)
	}
	f.Add(`{"model":"claude","metadata":{"user_id":"u"},"max_tokens":5}`)
	f.Add(`{"model":"claude","metadata":{"user_id":"u","user_id":"v"}}`)
	f.Add(`{"model":"gpt","max_output_tokens":5,"safety_identifier":"u","prompt_cache_key":"k","previous_response_id":"r"}`)
	f.Fuzz(func(t *testing.T, give string) {
		for _, rf := range []*readSet{openAIFields, anthropicFields, responsesFields} {
			got, ok := scan([]byte(give), rf)
			if !ok {
				continue
			}
			want, err := rf.decode([]byte(give), rf)
			if err != nil {
				t.Fatalf("scan(%q, %v) = %+v, but encoding/json refuses it: %v", give, rf.names, got, err)
			}
			if got != want {
				t.Fatalf("scan(%q, %v) = %+v, encoding/json reads %+v", give, rf.names, got, want)
			}
		}
	})
}

// TestTokenEstimate: Parse measures the body's text by script and the
// output the request may use, which Reserve adds up.
func TestTokenEstimate(t *testing.T) {
	body := `{"model":"m","max_completion_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	req, err := Parse(sluice.ProtocolOpenAIChat, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.Text != (sluice.TextSize{Chars: len(body)}) || req.Output != 100 {
		t.Errorf("Text %+v, Output %d; want %d characters and 100", req.Text, req.Output, len(body))
	}
	if want := (len(body)+3)/4 + 100; req.Reserve() != want {
		t.Errorf("Reserve() = %d, want %d (prompt characters/4 + max_completion_tokens)", req.Reserve(), want)
	}
	zh := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"请用一句话介绍北京"}]}`
	req, _ = Parse(sluice.ProtocolOpenAIChat, []byte(zh))
	if req.Text.CJK != 9 || req.Reserve() != (len(zh)-27+3)/4+9+10 {
		t.Errorf("Chinese prompt: Text %+v, Reserve() = %d; want 9 CJK characters counted a token each", req.Text, req.Reserve())
	}
	req, _ = Parse(sluice.ProtocolOpenAIChat, []byte(`{"model":"m"}`))
	if req.Output != defaultOutputTokens {
		t.Errorf("Output without max_tokens = %d, want the default %d reserved", req.Output, defaultOutputTokens)
	}
	req, _ = Parse(sluice.ProtocolOpenAIEmbeddings, []byte(`{"model":"m","input":"hello"}`))
	if req.Output != 0 {
		t.Errorf("embeddings Output = %d, want none", req.Output)
	}
	// max_tokens at the top of int64 once wrapped the sum to a negative
	// number, which reserved nothing.
	req, _ = Parse(sluice.ProtocolOpenAIChat, []byte(`{"model":"m","max_tokens":9223372036854775807}`))
	if req.Reserve() != sluice.MaxTokenEstimate {
		t.Errorf("Reserve() with the largest max_tokens = %d, want the cap %d", req.Reserve(), sluice.MaxTokenEstimate)
	}
}

func BenchmarkParse(b *testing.B) {
	body := []byte(`{"model":"fast","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Tell me about the weather in Paris today, please."}],"stream":true,"temperature":0.2}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(sluice.ProtocolOpenAIChat, body); err != nil {
			b.Fatal(err)
		}
	}
}
