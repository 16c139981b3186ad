package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

func TestUsageScanner(t *testing.T) {
	tests := []struct {
		name      string
		give      string
		wantUsage string // "" for none
		wantErr   bool   // not one JSON object, or cut
	}{
		{name: "answer", give: `{"id":"c","choices":[{"message":{"content":"say \"usage\": {1}"}}],"usage":{"prompt_tokens":3,"x":[1,{"y":"}"}]}}`,
			wantUsage: `{"prompt_tokens":3,"x":[1,{"y":"}"}]}`},
		{name: "usage first, spaced", give: " {\n \"usage\" : {\"a\":1} ,\"b\":2}\n", wantUsage: `{"a":1}`},
		{name: "scalar usage", give: `{"usage": null , "b":2}`, wantUsage: `null`},
		{name: "scalar usage last", give: `{"usage":12 }`, wantUsage: `12`},
		{name: "last usage wins", give: `{"usage":{"a":1},"usage":{"a":2}}`, wantUsage: `{"a":2}`},
		{name: "nested usage is not the answer's", give: `{"choices":{"usage":{"a":1}}}`},
		{name: "usage as a value is not a key", give: `{"k":"usage","n":["usage",{"usage":1}]}`},
		{name: "escaped key is not matched", give: `{"usag\u0065":{"a":1}}`},
		{name: "longer key", give: `{"usages":{"a":1},"usag":2}`},
		{name: "escaped quote in a key", give: `{"u\"":1,"usage":{"a":"\\"}}`, wantUsage: `{"a":"\\"}`},
		{name: "Gemini's usageMetadata", give: `{"candidates":[{"content":{"parts":[{"text":"\"usage\""}]}}],"usageMetadata":{"promptTokenCount":3}}`,
			wantUsage: `{"promptTokenCount":3}`},
		{name: "nested usageMetadata is not the answer's", give: `{"candidates":[{"usageMetadata":{"a":1}}]}`},
		{name: "keys near usageMetadata", give: `{"usageMetadat":1,"usageMetadataX":2,"UsageMetadata":3}`},
		{name: "the last usage member wins", give: `{"usage":{"a":1},"usageMetadata":{"a":2}}`, wantUsage: `{"a":2}`},
		{name: "empty object", give: `{}`},
		{name: "cut", give: `{"usage":{"a":1}`, wantErr: true},
		{name: "cut in usage", give: `{"usage":{"a":1`, wantErr: true},
		{name: "HTML", give: `<!DOCTYPE html><html></html>`, wantErr: true},
		{name: "array", give: `[{"usage":1}]`, wantErr: true},
		{name: "trailing data", give: `{"usage":1}{"usage":2}`, wantErr: true},
		{name: "unbalanced", give: `{"a":1}}`, wantErr: true},
		{name: "empty", give: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for split := range len(tt.give) + 1 {
				var s usageScanner
				s.Write([]byte(tt.give[:split]))
				s.Write([]byte(tt.give[split:]))
				if err := s.Err(true); (err != nil) != tt.wantErr {
					t.Fatalf("split at %d: Err = %v, want error %v", split, err, tt.wantErr)
				}
				if got := string(s.Usage()); !tt.wantErr && got != tt.wantUsage {
					t.Fatalf("split at %d: Usage = %q, want %q", split, got, tt.wantUsage)
				}
			}
		})
	}
}

func TestUsageScannerBoundsWhatItKeeps(t *testing.T) {
	var s usageScanner
	s.Write([]byte(`{"usage":{"pad":"`))
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for range 64 { // 2 MiB of usage value
		s.Write(chunk)
	}
	s.Write([]byte(`"},"id":"c"}`))
	if err := s.Err(true); err != nil || s.Usage() != nil || cap(s.value) > 2*maxUsageValue {
		t.Errorf("Err %v, usage %d bytes, %d held; want a valid answer with no usage and at most %d held", err, len(s.Usage()), cap(s.value), 2*maxUsageValue)
	}
}

// FuzzUsageScanner checks the scanner, fed a valid JSON value in three
// pieces split anywhere, against readAnswer (which holds it whole) and
// encoding/json: it takes exactly the objects, and picks the same usage.
func FuzzUsageScanner(f *testing.F) {
	f.Add(`{"id":"c","usage":{"prompt_tokens":3,"completion_tokens":4},"x":"\"usage\""}`, uint(5), uint(30))
	f.Add(`{"usage":null,"usage":{"total_tokens":1}}`, uint(1), uint(2))
	f.Add(` [ {"usage":1} ] `, uint(3), uint(9))
	f.Add(`{"a":{"usage":{"b":[1,2,{"c":"\\u0022"}]}}, "usage" : 7 }`, uint(20), uint(40))
	f.Add(`{"candidates":[{"index":0}],"usageMetadata":{"promptTokenCount":2}}`, uint(10), uint(50))
	f.Fuzz(func(t *testing.T, body string, cut1, cut2 uint) {
		if !json.Valid([]byte(body)) {
			return
		}
		i := int(cut1 % uint(len(body)+1))
		j := i + int(cut2%uint(len(body)-i+1))
		var s usageScanner
		for _, piece := range []string{body[:i], body[i:j], body[j:]} {
			s.Write([]byte(piece))
		}
		fields, isObject := readAnswer([]byte(body))
		if err := s.Err(true); (err == nil) != isObject {
			if !isObject && jsonfield.Members([]byte(body), func(_, _ []byte) error { return nil }) == jsonfield.ErrInvalid {
				return // deeper than Members' nesting limit: the scanner has none
			}
			t.Fatalf("Err(%q) = %v, want an error exactly for a value that is not an object (object: %v)", body, err, isObject)
		}
		if !isObject {
			return
		}
		if got := string(s.Usage()); got != string(fields.usage) {
			t.Fatalf("Usage(%q) = %q, readAnswer reads %q", body, got, fields.usage)
		}
		var ref struct {
			Usage json.RawMessage `json:"usage"`
		}
		plain := jsonfield.Members([]byte(body), func(key, _ []byte) error {
			if !jsonfield.PlainKey(key) {
				return jsonfield.ErrNotPlain
			}
			return nil
		}) == nil
		if plain && json.Unmarshal([]byte(body), &ref) == nil && openai.UsageValue(s.Usage()) != openai.UsageValue(ref.Usage) {
			t.Fatalf("usage of %q = %+v, encoding/json reads %+v", body, openai.UsageValue(s.Usage()), openai.UsageValue(ref.Usage))
		}
	})
}

// TestLongGeminiAnswerIsMeasured: a Gemini answer longer than Sluice holds
// is passed on with its usageMetadata read on the way.
func TestLongGeminiAnswerIsMeasured(t *testing.T) {
	answer := `{"candidates":[{"content":{"parts":[{"text":"` + strings.Repeat("x", 2*maxHeldAnswer) + `"}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":4,"candidatesTokenCount":5,"totalTokenCount":14},"modelVersion":"gemini-2.5-flash"}`
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(answer))}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	rd := &idleReader{r: strings.NewReader(answer), p: startPhases(cancel, sluice.Timeouts{})}
	held, whole, err := readHeld(rd, resp.ContentLength)
	if err != nil || whole {
		t.Fatalf("readHeld = %d bytes, whole %v, %v; want the held part of a longer answer", len(held), whole, err)
	}
	w := httptest.NewRecorder()
	a := new(Caller).passOn(ctx, ctx, w, resp, rd, held, Attempt{}, time.Now(), Hooks{}, exchange{dialect: GeminiGenerate, ending: GeminiEnding, secret: testSecret})
	want := sluice.Usage{PromptTokens: 9, CompletionTokens: 5, CachedTokens: 4, TotalTokens: 14, Measured: true}
	if a.Err != nil || a.Exec.Usage != want || w.Body.String() != answer {
		t.Errorf("passOn = usage %+v, err %v, %d of %d bytes; want usage %+v and the whole answer", a.Exec.Usage, a.Err, w.Body.Len(), len(answer), want)
	}
}

// BenchmarkUsageScanner scans long answers for their usage, 32 KiB a
// write: one whose bulk is a string (text), one whose bulk is small nested
// objects (logprobs).
func BenchmarkUsageScanner(b *testing.B) {
	answers := map[string]string{
		"text": `{"id":"c","choices":[{"message":{"content":"` + strings.Repeat(`lorem ipsum \"dolor\" `, 1<<16) + `"}}],"usage":{"prompt_tokens":3}}`,
		"logprobs": `{"id":"c","choices":[{"logprobs":{"content":[` + strings.Repeat(`{"token":"a","logprob":-0.1,"bytes":[97]},`, 1<<15) +
			`{"token":"b","logprob":-1,"bytes":[98]}]}}],"usage":{"prompt_tokens":3}}`,
	}
	for name, text := range answers {
		answer := []byte(text)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				var s usageScanner
				for rest := answer; len(rest) > 0; {
					n := min(len(rest), 32<<10)
					s.Write(rest[:n])
					rest = rest[n:]
				}
				if s.Usage() == nil {
					b.Fatal("no usage")
				}
			}
		})
	}
}
