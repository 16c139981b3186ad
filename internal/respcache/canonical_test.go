package respcache

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzCanonical: the canonical form of any JSON object is JSON with the
// same value, less the ignored top-level members, and is its own canonical
// form; anything else is refused without a panic.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[{"z":true,"y":null}],"stream":true}`,
		`{ "x" : "a\"b\\\\" , "n": -0.5e+3, "o": {}, "l": [] }`,
		`{"a":1,"a":2}`,
		`{"generationConfig":{"temperature":0}}`,
		`[1]`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"a":01}`, `{"a":"x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := canon{}
		rest, err := c.value(body, 0)
		var want map[string]any
		if json.Unmarshal(body, &want) != nil || want == nil {
			return // not an object: any outcome but a panic
		}
		if err != nil || len(skipSpace(rest)) > 0 {
			t.Fatalf("%s: refused (%v)", body, err)
		}
		for _, name := range ignored {
			delete(want, name)
		}
		var got map[string]any
		if err := json.Unmarshal(c.out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: canonical %s decodes to %v (%v), want %v", body, c.out, got, err, want)
		}
		again := canon{}
		if _, err := again.value(c.out, 0); err != nil || string(again.out) != string(c.out) {
			t.Fatalf("%s: canonical %s is not its own canonical form: %s", body, c.out, again.out)
		}
	})
}
