package jsonfield

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	tests := []struct {
		name string
		give string
		key  string
		want string // "" = absent
	}{
		{"first", `{"model":"gpt","x":1}`, "model", `"gpt"`},
		{"last", `{"x":1,"model":"gpt"}`, "model", `"gpt"`},
		{"spaces", "{ \"a\" : [1,{\"model\":2}] ,\n \"model\" :\t\"m\" }", "model", `"m"`},
		{"nested only", `{"a":{"model":"inner"}}`, "model", ""},
		{"string with brackets", `{"a":"}{][\"","model":"m"}`, "model", `"m"`},
		{"escaped key", `{"mod\u0065l":"m"}`, "model", `"m"`},
		{"number", `{"n":12.5e3,"model":true}`, "n", `12.5e3`},
		{"object value", `{"stream_options":{"include_usage":false}}`, "stream_options", `{"include_usage":false}`},
		{"empty", `{}`, "model", ""},
		{"duplicate takes last", `{"model":"a","model":"b"}`, "model", `"b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, e, ok, err := Find([]byte(tt.give), tt.key)
			if err != nil {
				t.Fatalf("Find(%s) error %v", tt.give, err)
			}
			got := ""
			if ok {
				got = tt.give[s:e]
			}
			if got != tt.want {
				t.Errorf("Find(%s, %q) = %q, want %q", tt.give, tt.key, got, tt.want)
			}
		})
	}
}

// TestFields checks Fields walks the top-level members of valid JSON as
// Members does, without Members' nesting limit.
func TestFields(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+10) + strings.Repeat("]", maxDepth+10)
	tests := []struct {
		name string
		give string
		want []string // key=value for each member, in order
	}{
		{name: "members in order", give: ` {"b" : 1, "a":{"x":[1,"]"]},"b":null} `, want: []string{"b=1", `a={"x":[1,"]"]}`, "b=null"}},
		{name: "key as written", give: `{"mod\u0065l":"m"}`, want: []string{`mod\u0065l="m"`}},
		{name: "empty", give: `{}`},
		{name: "deeper than Members goes", give: `{"d":` + deep + `,"model":"m"}`, want: []string{"d=" + deep, `model="m"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := Fields([]byte(tt.give), func(key, value []byte) error {
				got = append(got, string(key)+"="+string(value))
				return nil
			})
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Fields(%s) = %q, %v; want %q", tt.give, got, err, tt.want)
			}
		})
	}
	if err := Fields([]byte(`[1]`), func(_, _ []byte) error { return nil }); !errors.Is(err, ErrNotObject) {
		t.Errorf("Fields([1]) error = %v, want ErrNotObject", err)
	}
	stop := errors.New("stop")
	calls := 0
	if err := Fields([]byte(`{"a":1,"b":2}`), func(_, _ []byte) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Fields with a failing callback = %v after %d calls, want stop after 1", err, calls)
	}
}

func TestFindRejectsNonObjects(t *testing.T) {
	for _, give := range []string{``, `[]`, `"s"`, `{"a"}`, `{"a":1`, `{"a":"x`, `{"a":1 "b":2}`} {
		if _, _, _, err := Find([]byte(give), "a"); err == nil {
			t.Errorf("Find(%q) error = nil, want ErrNotObject", give)
		}
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		key   string
		value string
		want  string
	}{
		{"replace", `{"model":"alias","stream":true}`, "model", `"up"`, `{"model":"up","stream":true}`},
		{"add", `{"model":"a"}`, "stream_options", `{"include_usage":true}`, `{"stream_options":{"include_usage":true},"model":"a"}`},
		{"add to empty", ` { } `, "k", `1`, ` {"k":1 } `},
		{"replace object", `{"stream_options":{"include_usage":false},"m":1}`, "stream_options", `{"include_usage":true}`, `{"stream_options":{"include_usage":true},"m":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Set([]byte(tt.give), tt.key, []byte(tt.value))
			if err != nil || string(got) != tt.want {
				t.Errorf("Set(%s) = %s, %v; want %s", tt.give, got, err, tt.want)
			}
		})
	}
}

// FuzzSet checks that on any valid JSON object Set never panics and yields a
// valid object whose field decodes to the value set, with every other field kept.
func FuzzSet(f *testing.F) {
	f.Add(`{"model":"alias","stream":true}`)
	f.Add(`{"a":{"model":"inner"},"b":[1,"]"]}`)
	f.Add(`{}`)
	f.Add(`{"mod\u0065l":"x"}`)
	f.Fuzz(func(t *testing.T, give string) {
		var before map[string]json.RawMessage
		if json.Unmarshal([]byte(give), &before) != nil || before == nil {
			return // Set is only defined on valid objects, which ingress guarantees
		}
		out, err := SetString([]byte(give), "model", "upstream")
		if err != nil {
			t.Fatalf("Set(%s) error %v", give, err)
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("Set(%s) = %s, not valid JSON: %v", give, out, err)
		}
		var m string
		if json.Unmarshal(after["model"], &m) != nil || m != "upstream" {
			t.Fatalf("Set(%s) = %s, model not set", give, out)
		}
		for k := range before {
			if k != "model" && string(before[k]) != string(after[k]) {
				t.Fatalf("Set(%s) = %s, field %q changed", give, out, k)
			}
		}
	})
}

// FuzzAppendQuoted checks that a string is quoted exactly as
// encoding/json quotes it.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"gpt-4o-mini", "", `a"b`, `a\b`, "<&>", "é", "\xff", "tab\there", "~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		want, _ := json.Marshal(give)
		if got := appendQuoted(nil, give); string(got) != string(want) {
			t.Fatalf("appendQuoted(%q) = %s, want %s", give, got, want)
		}
	})
}

func BenchmarkSetModel(b *testing.B) {
	body := []byte(`{"model":"fast","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Tell me about the weather in Paris today, please."}],"stream":true,"temperature":0.2}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetString(body, "model", "gpt-4o-mini"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDelete(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"model":"m","x":1}`, `{"x":1}`},
		{`{"x":1,"model":"m"}`, `{"x":1}`},
		{`{"x":1, "model" : "m" ,"y":[2]}`, `{"x":1 ,"y":[2]}`},
		{`{ "model":"m" }`, `{  }`},
		{`{"model":"a","model":"b","x":{"model":1}}`, `{"x":{"model":1}}`},
		{`{"x":1}`, `{"x":1}`},
	} {
		got, err := Delete([]byte(tt.in), "model")
		if err != nil || string(got) != tt.want {
			t.Errorf("Delete(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("Delete(%s) = %s: not JSON", tt.in, got)
		}
	}
	if _, err := Delete([]byte(`[1]`), "model"); err == nil {
		t.Error("Delete of an array: no error")
	}
}
