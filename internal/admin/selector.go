package admin

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/internal/config"
)

// selector is a parsed label selector, in the shape of Kubernetes' equality
// and set selectors: requirements separated by commas, every one of which
// must hold.
//
//	team=web         the label team is web (also team==web)
//	env!=prod        the label env is not prod, or the key has no env label
//	tier in (a,b)    the label tier is a or b
//	tier notin (a,b) the label tier is neither, or the key has no tier label
//	canary           the key has the label canary
//	!canary          the key has no label canary
//
// Label names follow the rule for stable IDs. Values are trimmed; a value
// holding ',', '(' or ')' cannot be selected.
type selector []requirement

// requirement is one condition on one label.
type requirement struct {
	name   string
	op     selectorOp
	values []string // one for equals and notEquals, one or more for in and notIn, none otherwise
}

type selectorOp string

const (
	opEquals    selectorOp = "="
	opNotEquals selectorOp = "!="
	opIn        selectorOp = "in"
	opNotIn     selectorOp = "notin"
	opExists    selectorOp = ""
	opAbsent    selectorOp = "!"
)

// parseSelector parses s; an empty selector is an error, so that a batch
// operation never selects every key by accident.
func parseSelector(s string) (selector, error) {
	parts, err := splitRequirements(s)
	if err != nil {
		return nil, invalid("selector %q: %v", s, err)
	}
	sel := make(selector, 0, len(parts))
	for _, p := range parts {
		r, err := parseRequirement(strings.TrimSpace(p))
		if err != nil {
			return nil, invalid("selector %q: %v", s, err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// splitRequirements splits s at the commas outside parentheses.
func splitRequirements(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty; name at least one label (for example team=web)")
	}
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			if depth++; depth > 1 {
				return nil, errors.New("nested parentheses")
			}
		case ')':
			if depth--; depth < 0 {
				return nil, errors.New("')' without '('")
			}
		case ',':
			if depth == 0 {
				parts, start = append(parts, s[start:i]), i+1
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("'(' without ')'")
	}
	return append(parts, s[start:]), nil
}

// parseRequirement parses one trimmed requirement.
func parseRequirement(s string) (requirement, error) {
	var r requirement
	switch {
	case s == "":
		return r, errors.New("empty requirement (two commas in a row?)")
	case s[0] == '!':
		r = requirement{name: strings.TrimSpace(s[1:]), op: opAbsent}
	case strings.Contains(s, "("):
		name, rest, _ := cutSpace(s)
		word, list, _ := strings.Cut(rest, "(")
		r = requirement{name: name, op: selectorOp(strings.TrimSpace(word))}
		if r.op != opIn && r.op != opNotIn || !strings.HasSuffix(list, ")") {
			return r, errors.New("want name in (a,b) or name notin (a,b)")
		}
		for v := range strings.SplitSeq(strings.TrimSuffix(list, ")"), ",") {
			r.values = append(r.values, strings.TrimSpace(v))
		}
		if slices.Contains(r.values, "") {
			return r, fmt.Errorf("%s (…) has an empty value", r.op)
		}
	case strings.ContainsAny(s, "=!"):
		i := strings.IndexAny(s, "=!")
		r.name = strings.TrimSpace(s[:i])
		var value string
		switch rest := s[i:]; {
		case strings.HasPrefix(rest, "!="):
			r.op, value = opNotEquals, rest[2:]
		case strings.HasPrefix(rest, "=="):
			r.op, value = opEquals, rest[2:]
		case rest[0] == '=':
			r.op, value = opEquals, rest[1:]
		default:
			return r, errors.New("'!' must start a requirement (!name) or be part of '!='")
		}
		r.values = []string{strings.TrimSpace(value)}
	default:
		r = requirement{name: s, op: opExists}
	}
	if msg := config.CheckID(r.name); msg != "" || r.name == "" {
		return r, fmt.Errorf("label name %q may contain only letters, digits, '.', '_' and '-', and must not be empty", r.name)
	}
	for _, v := range r.values {
		if len(v) > config.MaxLabelValue {
			return r, fmt.Errorf("a value is longer than %d bytes", config.MaxLabelValue)
		}
	}
	return r, nil
}

// cutSpace cuts s around its first run of white space.
func cutSpace(s string) (before, after string, found bool) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, "", false
	}
	return s[:i], strings.TrimSpace(s[i:]), true
}

// matches reports whether labels satisfy every requirement.
func (sel selector) matches(labels map[string]string) bool {
	for _, r := range sel {
		v, has := labels[r.name]
		var ok bool
		switch r.op {
		case opEquals:
			ok = has && v == r.values[0]
		case opNotEquals:
			ok = !has || v != r.values[0]
		case opIn:
			ok = has && slices.Contains(r.values, v)
		case opNotIn:
			ok = !has || !slices.Contains(r.values, v)
		case opExists:
			ok = has
		case opAbsent:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// String is the selector in canonical form: "team=web,tier in (a,b)".
func (sel selector) String() string {
	var b strings.Builder
	for i, r := range sel {
		if i > 0 {
			b.WriteByte(',')
		}
		switch r.op {
		case opEquals:
			op := "="
			if strings.HasPrefix(r.values[0], "=") {
				op = "==" // else "a=" + "=b" would read back as a== with value b
			}
			b.WriteString(r.name + op + r.values[0])
		case opNotEquals:
			b.WriteString(r.name + "!=" + r.values[0])
		case opIn, opNotIn:
			b.WriteString(r.name + " " + string(r.op) + " (" + strings.Join(r.values, ",") + ")")
		case opExists:
			b.WriteString(r.name)
		case opAbsent:
			b.WriteString("!" + r.name)
		}
	}
	return b.String()
}
