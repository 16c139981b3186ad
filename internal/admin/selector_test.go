package admin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var selectorTests = []struct {
	name string
	give string
	want selector
}{
	{"Equals", "team=web", selector{{name: "team", op: opEquals, values: []string{"web"}}}},
	{"DoubleEquals", "team==web", selector{{name: "team", op: opEquals, values: []string{"web"}}}},
	{"NotEquals", "env!=prod", selector{{name: "env", op: opNotEquals, values: []string{"prod"}}}},
	{"EmptyValue", "team=", selector{{name: "team", op: opEquals, values: []string{""}}}},
	{"Spaces", " team = web , env != prod ", selector{
		{name: "team", op: opEquals, values: []string{"web"}}, {name: "env", op: opNotEquals, values: []string{"prod"}},
	}},
	{"In", "tier in (gold, silver)", selector{{name: "tier", op: opIn, values: []string{"gold", "silver"}}}},
	{"InWithoutSpace", "tier in(gold)", selector{{name: "tier", op: opIn, values: []string{"gold"}}}},
	{"NotIn", "tier notin (free)", selector{{name: "tier", op: opNotIn, values: []string{"free"}}}},
	{"Exists", "canary", selector{{name: "canary", op: opExists}}},
	{"Absent", "!canary", selector{{name: "canary", op: opAbsent}}},
	{"ValueWithEquals", "q=a=b", selector{{name: "q", op: opEquals, values: []string{"a=b"}}}},
	{"Mixed", "team=web,tier in (a,b),!canary,env!=prod", selector{
		{name: "team", op: opEquals, values: []string{"web"}},
		{name: "tier", op: opIn, values: []string{"a", "b"}},
		{name: "canary", op: opAbsent},
		{name: "env", op: opNotEquals, values: []string{"prod"}},
	}},
}

func TestParseSelector(t *testing.T) {
	for _, tt := range selectorTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSelector(tt.give)
			if err != nil {
				t.Fatalf("parseSelector(%q) = %v", tt.give, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(requirement{})); diff != "" {
				t.Errorf("parseSelector(%q) (-want +got):\n%s", tt.give, diff)
			}
		})
	}
}

func TestParseSelectorRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // in the message
	}{
		{"Empty", "", "empty; name at least one label"},
		{"Blank", "  ", "empty"},
		{"TrailingComma", "team=web,", "empty requirement"},
		{"DoubleComma", "a=b,,c=d", "empty requirement"},
		{"NoName", "=web", `label name ""`},
		{"BadName", "te am=web", `label name "te am"`},
		{"SlashInName", "example.com/team=web", `label name "example.com/team"`},
		{"LoneBang", "team!web", "'!' must start a requirement"},
		{"UnknownSetWord", "tier within (a)", "want name in (a,b)"},
		{"NoCloseParen", "tier in (a,b", "'(' without ')'"},
		{"NoOpenParen", "tier in a,b)", "')' without '('"},
		{"Nested", "tier in ((a))", "nested parentheses"},
		{"TextAfterParen", "tier in (a) x", "want name in (a,b)"},
		{"EmptySetValue", "tier in (a,)", "in (…) has an empty value"},
		{"EmptySet", "tier notin ()", "notin (…) has an empty value"},
		{"LongValue", "team=" + strings.Repeat("x", 257), "longer than 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSelector(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseSelector(%q) error = %v, want it to contain %q", tt.give, err, tt.want)
			}
		})
	}
}

func TestSelectorMatches(t *testing.T) {
	web := map[string]string{"team": "web", "env": "prod", "tier": "gold"}
	tests := []struct {
		give   string
		labels map[string]string
		want   bool
	}{
		{"team=web", web, true},
		{"team=api", web, false},
		{"team=web", nil, false},
		{"env!=prod", web, false},
		{"env!=staging", web, true},
		{"env!=prod", map[string]string{}, true}, // no env label: not prod
		{"tier in (gold,silver)", web, true},
		{"tier in (silver)", web, false},
		{"tier in (gold)", nil, false},
		{"tier notin (gold)", web, false},
		{"tier notin (silver)", web, true},
		{"tier notin (gold)", nil, true},
		{"team", web, true},
		{"canary", web, false},
		{"!canary", web, true},
		{"!team", web, false},
		{"team=", map[string]string{"team": ""}, true},
		{"team=", nil, false},
		{"team=web,env!=prod", web, false},
		{"team=web,env!=staging,!canary", web, true},
	}
	for _, tt := range tests {
		sel, err := parseSelector(tt.give)
		if err != nil {
			t.Fatalf("parseSelector(%q) = %v", tt.give, err)
		}
		if got := sel.matches(tt.labels); got != tt.want {
			t.Errorf("%q matches %v = %v, want %v", tt.give, tt.labels, got, tt.want)
		}
	}
}

// FuzzParseSelector checks that parsing never panics and that a selector's
// canonical form parses back to the same selector.
func FuzzParseSelector(f *testing.F) {
	for _, tt := range selectorTests {
		f.Add(tt.give)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := parseSelector(s)
		if err != nil {
			return
		}
		again, err := parseSelector(sel.String())
		if err != nil {
			t.Fatalf("parseSelector(%q) = %v; its canonical form %q does not parse: %v", s, sel, sel.String(), err)
		}
		if diff := cmp.Diff(sel, again, cmp.AllowUnexported(requirement{})); diff != "" {
			t.Errorf("%q → %q parses differently (-first +again):\n%s", s, sel.String(), diff)
		}
	})
}
