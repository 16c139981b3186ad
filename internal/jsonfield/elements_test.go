package jsonfield

import (
	"strings"
	"testing"
)

func TestElements(t *testing.T) {
	for _, c := range []struct{ arr, want string }{
		{`[1, "a,]", {"b":[2,3]} ,[4] , null]`, `1|"a,]"|{"b":[2,3]}|[4]|null`},
		{`[ ]`, ``},
		{`["\"]"]`, `"\"]"`},
		{`{"a":1}`, ``},
	} {
		var got []string
		Elements([]byte(c.arr), func(start, end int) { got = append(got, c.arr[start:end]) })
		if strings.Join(got, "|") != c.want {
			t.Errorf("Elements(%s) = %q, want %q", c.arr, got, c.want)
		}
	}
}
