package upstream

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/internal/jsonfield"
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
		if plain && json.Unmarshal([]byte(body), &ref) == nil && usageValue(s.Usage()) != usageValue(ref.Usage) {
			t.Fatalf("usage of %q = %+v, encoding/json reads %+v", body, usageValue(s.Usage()), usageValue(ref.Usage))
		}
	})
}
