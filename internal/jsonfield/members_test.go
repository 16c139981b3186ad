package jsonfield

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMembers(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    []string // key=value for each member, in order
		wantErr error
	}{
		{name: "members in order", give: ` {"b" : 1, "a":{"x":[1,"]"]},"b":null} `, want: []string{"b=1", `a={"x":[1,"]"]}`, "b=null"}},
		{name: "empty", give: `{}`},
		{name: "key as written", give: `{"mod\u0065l":"m","Stream":true}`, want: []string{`mod\u0065l="m"`, "Stream=true"}},
		{name: "every kind of value", give: `{"s":"a\"\\\/\b\f\n\r\t\u00e9","n":-0.5e+3,"t":true,"f":false,"z":null,"e":[]}`,
			want: []string{`s="a\"\\\/\b\f\n\r\t\u00e9"`, "n=-0.5e+3", "t=true", "f=false", "z=null", "e=[]"}},
		{name: "invalid UTF-8 in a string is accepted", give: "{\"s\":\"\xff\"}", want: []string{"s=\"\xff\""}},
		{name: "array", give: `[1]`, wantErr: ErrNotObject},
		{name: "string", give: `"s"`, wantErr: ErrNotObject},
		{name: "null", give: ` null `, wantErr: ErrNotObject},
		{name: "nothing", give: ` `, wantErr: ErrInvalid},
		{name: "trailing value", give: `{} {}`, wantErr: ErrInvalid},
		{name: "trailing garbage after a scalar", give: `1 x`, wantErr: ErrInvalid},
		{name: "unterminated", give: `{"a":1`, wantErr: ErrInvalid},
		{name: "trailing comma", give: `{"a":1,}`, wantErr: ErrInvalid},
		{name: "nested trailing comma", give: `{"a":[1,]}`, wantErr: ErrInvalid},
		{name: "leading zero", give: `{"a":01}`, wantErr: ErrInvalid},
		{name: "bare fraction", give: `{"a":1.}`, wantErr: ErrInvalid},
		{name: "bare exponent", give: `{"a":1e}`, wantErr: ErrInvalid},
		{name: "plus sign", give: `{"a":+1}`, wantErr: ErrInvalid},
		{name: "bad escape", give: `{"a":"\x"}`, wantErr: ErrInvalid},
		{name: "short unicode escape", give: `{"a":"\u12"}`, wantErr: ErrInvalid},
		{name: "control character", give: "{\"a\":\"\t\"}", wantErr: ErrInvalid},
		{name: "misspelt literal", give: `{"a":nul}`, wantErr: ErrInvalid},
		{name: "literal run on", give: `{"a":truex}`, wantErr: ErrInvalid},
		{name: "single quotes", give: `{'a':1}`, wantErr: ErrInvalid},
		{name: "too deep", give: `{"a":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := Members([]byte(tt.give), func(key, value []byte) error {
				got = append(got, string(key)+"="+string(value))
				return nil
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Members(%s) error = %v, want %v", tt.give, err, tt.wantErr)
			}
			if tt.wantErr == nil && strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("Members(%s) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

func TestMembersStopsAtCallbackError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := Members([]byte(`{"a":1,"b":2}`), func(key, value []byte) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("Members = %v after %d calls, want the callback's error after 1", err, calls)
	}
}

// FuzzMembers checks Members against encoding/json: it accepts exactly the
// objects json.Valid accepts (up to its depth bound), and the last value it
// gives for a key is the one encoding/json keeps.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1.5e3}`, `{"a":1,"a":2}`, `[]`, `{"a":"\u00e9\n"}`, `{"a":01}`, ` {} `, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		last := map[string]string{}
		err := Members([]byte(give), func(key, value []byte) error {
			last[string(key)] = string(value)
			return nil
		})
		valid := json.Valid([]byte(give))
		switch {
		case err == nil:
			var want map[string]json.RawMessage
			if e := json.Unmarshal([]byte(give), &want); e != nil || want == nil {
				t.Fatalf("Members(%q) = nil, but encoding/json does not take it as an object: %v", give, e)
			}
			for k, v := range last {
				decoded := !strings.Contains(k, `\`) && utf8.ValidString(k) // encoding/json's key is k itself
				if decoded && string(want[k]) != v {
					t.Fatalf("Members(%q): %s = %s, encoding/json keeps %s", give, k, v, want[k])
				}
			}
		case errors.Is(err, ErrNotObject):
			if !valid || strings.HasPrefix(strings.TrimLeft(give, " \t\r\n"), "{") {
				t.Fatalf("Members(%q) = ErrNotObject, json.Valid = %v", give, valid)
			}
		case valid && strings.Count(give, "[")+strings.Count(give, "{") <= maxDepth:
			t.Fatalf("Members(%q) = %v, but json.Valid accepts it", give, err)
		}
	})
}

func TestDecodeInt(t *testing.T) {
	tests := []struct {
		give    string
		want    int64
		wantErr error
	}{
		{"0", 0, nil},
		{"-0", 0, nil},
		{"100", 100, nil},
		{"-42", -42, nil},
		{"null", 7, nil}, // left as it was
		{"9223372036854775807", 9223372036854775807, nil},
		{"-9223372036854775808", -9223372036854775808, nil},
		{"9223372036854775808", 7, ErrNotPlain},
		{"-9223372036854775809", 7, ErrNotPlain},
		{"99999999999999999999", 7, ErrNotPlain},
		{"1.0", 7, ErrNotPlain},
		{"1e3", 7, ErrNotPlain},
		{"-", 7, ErrNotPlain},
		{`"1"`, 7, ErrNotPlain},
		{"true", 7, ErrNotPlain},
	}
	for _, tt := range tests {
		got := int64(7)
		if err := DecodeInt(&got, []byte(tt.give)); got != tt.want || err != tt.wantErr {
			t.Errorf("DecodeInt(%s) = %d, %v; want %d, %v", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzDecodeInt checks DecodeInt against encoding/json on every JSON number.
func FuzzDecodeInt(f *testing.F) {
	for _, s := range []string{"0", "-12", "9223372036854775807", "1e3", "1.5", "-9223372036854775809"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		if end, err := validNumber([]byte(give+" "), 0); err != nil || end != len(give) {
			return // DecodeInt is defined on JSON values
		}
		var got, want int64
		err := DecodeInt(&got, []byte(give))
		wantErr := json.Unmarshal([]byte(give), &want)
		if (err == nil) != (wantErr == nil) || err == nil && got != want {
			t.Fatalf("DecodeInt(%s) = %d, %v; encoding/json: %d, %v", give, got, err, want, wantErr)
		}
	})
}

func TestDecodeStringAndBool(t *testing.T) {
	for _, tt := range []struct {
		give    string
		want    string
		wantErr error
	}{{`"gpt-4o"`, "gpt-4o", nil}, {`""`, "", nil}, {`"é"`, "é", nil}, {`null`, "was", nil},
		{`"a\"b"`, "was", ErrNotPlain}, {`"\u0041"`, "was", ErrNotPlain}, {"\"\xff\"", "was", ErrNotPlain}, {`7`, "was", ErrNotPlain}, {`{}`, "was", ErrNotPlain}} {
		got := "was"
		if err := DecodeString(&got, []byte(tt.give)); got != tt.want || err != tt.wantErr {
			t.Errorf("DecodeString(%s) = %q, %v; want %q, %v", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
	for _, tt := range []struct {
		give    string
		want    bool
		wantErr error
	}{{"true", true, nil}, {"false", false, nil}, {"null", true, nil}, {`"true"`, true, ErrNotPlain}, {"1", true, ErrNotPlain}} {
		got := true
		if err := DecodeBool(&got, []byte(tt.give)); got != tt.want || err != tt.wantErr {
			t.Errorf("DecodeBool(%s) = %v, %v; want %v, %v", tt.give, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPlainKey(t *testing.T) {
	for _, tt := range []struct {
		give string
		want bool
	}{{"model", true}, {"max_tokens", true}, {"a-1 b", true}, {"Model", false}, {`mod\u0065l`, false}, {"ſtream", false}} {
		if got := PlainKey([]byte(tt.give)); got != tt.want {
			t.Errorf("PlainKey(%s) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func BenchmarkMembers(b *testing.B) {
	body := []byte(`{"model":"fast","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Tell me about the weather in Paris today, please."}],"stream":true,"temperature":0.2}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := Members(body, func(key, value []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPlainMembersStopsAtAKeyThatIsNotPlain(t *testing.T) {
	var seen []string
	err := PlainMembers([]byte(`{"model":"m","Model":"x","user":"u"}`), func(key, _ []byte) error {
		seen = append(seen, string(key))
		return nil
	})
	if !errors.Is(err, ErrNotPlain) || len(seen) != 1 || seen[0] != "model" {
		t.Errorf("PlainMembers = %v after %v; want ErrNotPlain after model only", err, seen)
	}
}

func TestFoldKey(t *testing.T) {
	tests := []struct{ give, want string }{
		{give: `model`, want: "model"},
		{give: `Model`, want: "model"},
		{give: `MODEL`, want: "model"},
		{give: `mod\u0065l`, want: "model"},
		{give: `mod\u0045l`, want: "model"},
		{give: `model\u0000x`, want: "model"},
		{give: "\u017ftream", want: "stream"},         // ſ, folded by encoding/json
		{give: "max_to\u212aens", want: "max_tokens"}, // Kelvin sign
		{give: "\ufb06ream", want: "stream"},          // ﬆ, by Python's casefold
		{give: "\u0131nclude_usage", want: "include_usage"},
		{give: `mod\u00e9l`, want: "modél"},
		{give: "mod\xffl", want: "mod\ufffdl"},
		{give: `mod\ud800l`, want: "mod\ufffdl"},
	}
	for _, tt := range tests {
		if got := FoldKey([]byte(tt.give)); got != tt.want {
			t.Errorf("FoldKey(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// FuzzFoldKey checks that a key encoding/json matches to a lower-case field
// folds to that field's name, and that a plain key folds to itself.
func FuzzFoldKey(f *testing.F) {
	for _, s := range []string{`model`, `Model`, `mod\u0065l`, "\u017ftream", "max_to\u212aens", `x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		body := []byte(`{"` + key + `":1}`)
		var fields []byte
		if Members(body, func(k, _ []byte) error { fields = k; return nil }) != nil || string(fields) != key {
			return // not one well-formed key
		}
		var v struct {
			Stream    int `json:"stream"`
			MaxTokens int `json:"max_tokens"`
			Model     int `json:"model"`
		}
		if json.Unmarshal(body, &v) != nil {
			return
		}
		got := FoldKey([]byte(key))
		for name, set := range map[string]bool{"stream": v.Stream == 1, "max_tokens": v.MaxTokens == 1, "model": v.Model == 1} {
			if set && got != name {
				t.Errorf("FoldKey(%q) = %q, but encoding/json reads the key as %q", key, got, name)
			}
		}
		if PlainKey([]byte(key)) && got != key {
			t.Errorf("FoldKey(%q) = %q, want a plain key unchanged", key, got)
		}
	})
}
