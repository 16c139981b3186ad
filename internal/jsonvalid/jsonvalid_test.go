package jsonvalid

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var cases = []struct {
	in    string
	valid bool
}{
	{`{}`, true},
	{" \n{ } \t", true},
	{`{"a":1,"b":[true,false,null,-0.5e+10,"x\u00e9\n"],"c":{"d":[]}}`, true},
	{`{"a":[1,[2,[3]],{}]}`, true},
	{`{"a":1e5,"b":0,"c":-12.25E-3}`, true},
	{`{not json}`, false},
	{`{"a":}`, false},
	{`{"a":1,}`, false},
	{`{"a" 1}`, false},
	{`{"a":01}`, false},
	{`{"a":1.}`, false},
	{`{"a":-}`, false},
	{`{"a":1e}`, false},
	{`{"a":tru}`, false},
	{`{"a":"\x"}`, false},
	{`{"a":"\u12g4"}`, false},
	{"{\"a\":\"\x01\"}", false},
	{`{"a":[1}`, false},
	{`{"a":1]`, false},
	{`{} {}`, false},
	{`[]`, false},
	{`"x"`, false},
	{`{"a":1`, false},
	{``, false},
}

func TestValid(t *testing.T) {
	for _, c := range cases {
		if got := Valid([]byte(c.in)); got != c.valid {
			t.Errorf("Valid(%q) = %v, want %v", c.in, got, c.valid)
		}
	}
}

// TestPieces checks that an object written a byte at a time reads as it
// does whole, and that a bad one fails at its first bad byte: every
// write before it passes.
func TestPieces(t *testing.T) {
	for _, c := range cases {
		var o Object
		var err error
		for i := range len(c.in) {
			if err = o.Write([]byte{c.in[i]}); err != nil {
				if c.valid {
					t.Errorf("%q: byte %d: %v", c.in, i, err)
				}
				break
			}
		}
		if err == nil {
			err = o.End()
		}
		if (err == nil) != c.valid {
			t.Errorf("%q in pieces: %v, want valid %v", c.in, err, c.valid)
		}
	}
}

func TestDepth(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	if !Valid(deep(MaxDepth)) {
		t.Errorf("%d levels refused", MaxDepth)
	}
	var o Object
	if err := o.Write(deep(MaxDepth + 1)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("%d levels: %v, want ErrTooDeep", MaxDepth+1, err)
	}
}

func TestWriteDoesNotAllocate(t *testing.T) {
	b := []byte(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"hello \"world\"\n"},"finish_reason":null}],"usage":null}`)
	if n := testing.AllocsPerRun(100, func() { Valid(b) }); n != 0 {
		t.Errorf("Valid allocates %v times", n)
	}
}

// FuzzObject checks Valid against encoding/json (which takes any value:
// an Object takes an object only), and that a split write reads alike.
func FuzzObject(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.in), 3)
	}
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) > MaxDepth {
			return
		}
		want := json.Valid(b) && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
		if got := Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		if split < 0 || split > len(b) {
			return
		}
		var o Object
		err := o.Write(b[:split])
		if err == nil {
			err = o.Write(b[split:])
		}
		if err == nil {
			err = o.End()
		}
		if (err == nil) != want {
			t.Fatalf("%q split at %d: %v, want valid %v", b, split, err, want)
		}
	})
}
