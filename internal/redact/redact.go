// Package redact finds sensitive values in prompt text (e-mail addresses,
// phone numbers, mainland-China resident ID numbers, payment cards, IBANs,
// IP addresses, API-key-shaped strings and operator patterns) and masks,
// blocks or counts them by a compiled Policy. A Session applies a policy to
// every text part of one request, so the same value gets the same
// placeholder everywhere in it, and restores the placeholders in the
// answer, whole or streamed. It imports only the standard library.
package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Action is what a policy does with a finding. Their order is their
// strictness: when policies are merged the larger one wins.
type Action uint8

const (
	None  Action = iota // the detector is not enabled
	Log                 // count the finding, change nothing
	Mask                // replace the value with a typed placeholder
	Block               // refuse the request
)

var actionNames = [...]string{None: "", Log: "log", Mask: "mask", Block: "block"}

func (a Action) String() string { return actionNames[a] }

// ParseAction reads an action's catalog name.
func ParseAction(s string) (Action, bool) {
	for a, name := range actionNames {
		if name == s && a != int(None) {
			return Action(a), true
		}
	}
	return None, false
}

// Built-in detectors, in the order overlapping findings are preferred
// (an 18-digit ID number with a good checksum that also passes Luhn is an
// ID number).
const (
	Email = iota
	CNID
	Card
	IBAN
	Phone
	IPv4
	IPv6
	APIKey
	builtins
)

// detector is a built-in detector: its catalog name, its placeholder
// label, and its scanner, which appends the spans it finds to dst (nil
// for those found by Policy.scanNumbers alone).
type detector struct {
	name, label string
	scan        func(dst []span, text string, d int) []span
}

var detectors = [builtins]detector{
	Email:  {"email", "EMAIL", scanEmails},
	CNID:   {"cn_id", "CN_ID", nil},
	Card:   {"card", "CARD", nil},
	IBAN:   {"iban", "IBAN", scanIBANs},
	Phone:  {"phone", "PHONE", scanIntlPhones},
	IPv4:   {"ipv4", "IP", nil},
	IPv6:   {"ipv6", "IP", scanIPv6s},
	APIKey: {"api_key", "API_KEY", scanAPIKeys},
}

// Detectors lists the built-in detectors' catalog names.
func Detectors() []string {
	names := make([]string, builtins)
	for i, d := range detectors {
		names[i] = d.name
	}
	return names
}

// IsDetector reports whether name is a built-in detector.
func IsDetector(name string) bool { return detectorIndex(name) >= 0 }

func detectorIndex(name string) int {
	for i, d := range detectors {
		if d.name == name {
			return i
		}
	}
	return -1
}

// patternName is what an operator pattern's name must look like: it
// becomes the placeholder's label, upper-cased.
var patternName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Spec is a policy as the catalog writes it.
type Spec struct {
	Detectors map[string]string // detector name → action name
	Patterns  []PatternSpec
	Restore   bool
}

// PatternSpec is an operator's own detector: a regular expression whose
// every match is a finding.
type PatternSpec struct {
	Name, Regex, Action string
}

// Policy is a compiled Spec, or the union of several. It is immutable and
// shared by every request it applies to.
type Policy struct {
	actions  [builtins]Action
	patterns []pattern
	restore  bool
}

type pattern struct {
	name, label string
	re          *regexp.Regexp
	action      Action
}

// Compile checks a Spec and compiles it; its errors name the field at fault.
func Compile(s Spec) (*Policy, error) {
	p := &Policy{restore: s.Restore}
	for name, act := range s.Detectors {
		i := detectorIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("detectors: unknown detector %q (known: %s)", name, strings.Join(Detectors(), ", "))
		}
		a, ok := ParseAction(act)
		if !ok {
			return nil, fmt.Errorf("detectors.%s: unknown action %q (mask, block or log)", name, act)
		}
		p.actions[i] = a
	}
	seen := map[string]bool{}
	for i, ps := range s.Patterns {
		if !patternName.MatchString(ps.Name) {
			return nil, fmt.Errorf("patterns[%d].name: %q must be lower-case letters, digits and _ (at most 32, a letter first)", i, ps.Name)
		}
		if IsDetector(ps.Name) || seen[ps.Name] {
			return nil, fmt.Errorf("patterns[%d].name: %q is already a detector's name", i, ps.Name)
		}
		seen[ps.Name] = true
		a, ok := ParseAction(ps.Action)
		if !ok {
			return nil, fmt.Errorf("patterns[%d].action: unknown action %q (mask, block or log)", i, ps.Action)
		}
		re, err := regexp.Compile(ps.Regex)
		if err != nil {
			return nil, fmt.Errorf("patterns[%d].regex: %v", i, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("patterns[%d].regex: %q matches the empty string", i, ps.Regex)
		}
		p.patterns = append(p.patterns, pattern{name: ps.Name, label: strings.ToUpper(ps.Name), re: re, action: a})
	}
	return p, nil
}

// Merge is the union of policies: every detector and pattern any of them
// enables, the strictest action where they differ (block > mask > log),
// and restore when any of them restores. nil policies are skipped; the
// result is nil when none is left, and the one policy itself when only one
// is.
func Merge(policies ...*Policy) *Policy {
	var out *Policy
	for _, p := range policies {
		switch {
		case p == nil || p == out:
		case out == nil:
			out = p
		default:
			merged := &Policy{actions: out.actions, restore: out.restore || p.restore}
			merged.patterns = append(merged.patterns, out.patterns...)
			for i, a := range p.actions {
				merged.actions[i] = max(merged.actions[i], a)
			}
		next:
			for _, pt := range p.patterns {
				for j := range merged.patterns {
					if merged.patterns[j].name == pt.name && merged.patterns[j].re.String() == pt.re.String() {
						merged.patterns[j].action = max(merged.patterns[j].action, pt.action)
						continue next
					}
				}
				merged.patterns = append(merged.patterns, pt)
			}
			out = merged
		}
	}
	return out
}

// Restores reports whether masked values are put back in the answer.
func (p *Policy) Restores() bool { return p.restore }

// Finding is one value a detector found: the detector's (or pattern's)
// name, the action taken, and its span in the text it was found in.
type Finding struct {
	Detector   string
	Action     Action
	Start, End int
}

type span struct {
	start, end int
	det        int // index into detectors, or builtins+i for pattern i
}

// Session applies a policy to the text parts of one request and restores
// its placeholders in the answer. It is not safe for concurrent use.
type Session struct {
	policy *Policy
	// placeholders maps a masked value to its placeholder, values the
	// reverse; both are made on the first masked value.
	placeholders map[string]string
	values       map[string]string
	counts       map[string]int // per label: the last number given
	longest      int            // the longest placeholder given
	blocked      string         // the first blocking detector's name
}

// NewSession starts applying p to one request.
func (p *Policy) NewSession() *Session { return &Session{policy: p} }

// Blocked names the detector of the first blocking finding, "" for none.
func (s *Session) Blocked() string { return s.blocked }

// Masked reports whether any value was replaced by a placeholder.
func (s *Session) Masked() bool { return len(s.values) > 0 }

// Apply finds the policy's values in text and returns text with the masked
// ones replaced, and every finding (spans are in text). It allocates
// nothing when it finds nothing.
func (s *Session) Apply(text string) (string, []Finding) {
	spans := s.policy.find(text)
	if len(spans) == 0 {
		return text, nil
	}
	findings := make([]Finding, len(spans))
	var b strings.Builder
	last := 0
	for i, sp := range spans {
		name, label, act := s.policy.describe(sp.det)
		findings[i] = Finding{Detector: name, Action: act, Start: sp.start, End: sp.end}
		switch act {
		case Block:
			if s.blocked == "" {
				s.blocked = name
			}
		case Mask:
			if b.Cap() == 0 { // the first masked value: b's capacity marks it
				b.Grow(len(text) + 16)
			}
			b.WriteString(text[last:sp.start])
			b.WriteString(s.placeholder(label, text[sp.start:sp.end]))
			last = sp.end
		}
	}
	if b.Cap() == 0 {
		return text, findings
	}
	b.WriteString(text[last:])
	return b.String(), findings
}

func (p *Policy) describe(det int) (name, label string, act Action) {
	if det < builtins {
		return detectors[det].name, detectors[det].label, p.actions[det]
	}
	pt := &p.patterns[det-builtins]
	return pt.name, pt.label, pt.action
}

// placeholder returns value's placeholder, giving it the next number of its
// label when it has none yet.
func (s *Session) placeholder(label, value string) string {
	if ph, ok := s.placeholders[value]; ok {
		return ph
	}
	if s.placeholders == nil {
		s.placeholders, s.values, s.counts = map[string]string{}, map[string]string{}, map[string]int{}
	}
	s.counts[label]++
	ph := fmt.Sprintf("[%s_%d]", label, s.counts[label])
	s.placeholders[value], s.values[ph] = ph, value
	s.longest = max(s.longest, len(ph))
	return ph
}

// find returns the enabled detectors' spans in text, sorted and without
// overlaps: of two that overlap the earlier wins, then the longer, then
// the detector listed first.
func (p *Policy) find(text string) []span {
	var spans []span
	if candidate(text) {
		spans = p.scanNumbers(spans, text)
		for i, d := range detectors {
			if d.scan != nil && p.actions[i] != None {
				spans = d.scan(spans, text, i)
			}
		}
	}
	for i, pt := range p.patterns {
		for _, m := range pt.re.FindAllStringIndex(text, -1) {
			spans = append(spans, span{m[0], m[1], builtins + i})
		}
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return b.end - a.end
		}
		return a.det - b.det
	})
	kept := spans[:1]
	for _, sp := range spans[1:] {
		if sp.start >= kept[len(kept)-1].end {
			kept = append(kept, sp)
		}
	}
	return kept
}

// candidate reports whether text has a byte every built-in detector's
// values contain at least one of: a digit, '@' or ':'. (An API key with no
// digit at all is not matched; random keys have one.)
func candidate(text string) bool {
	for i := 0; i < len(text); i++ {
		if c := text[i]; c-'0' <= 9 || c == '@' || c == ':' {
			return true
		}
	}
	return false
}
