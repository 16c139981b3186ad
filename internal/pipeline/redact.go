package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/redact"
)

// redactions are the catalog's sensitive-data policies (docs/redaction.md),
// compiled once per snapshot, by what attaches them.
type redactions struct {
	byKey, byTenant, byAlias map[string]*redact.Policy
}

// compileRedactions compiles redaction[] and indexes the policies by the
// keys, tenants and aliases that name them; nil when none is attached.
func (s *Snapshot) compileRedactions(c *config.Catalog) error {
	if len(c.Redaction) == 0 {
		return nil
	}
	compiled := make(map[string]*redact.Policy, len(c.Redaction))
	for i := range c.Redaction {
		p, err := c.Redaction[i].Compile()
		if err != nil {
			return fmt.Errorf("redaction[%s]: %w", c.Redaction[i].ID, err)
		}
		compiled[c.Redaction[i].ID] = p
	}
	r := &redactions{byKey: map[string]*redact.Policy{}, byTenant: map[string]*redact.Policy{}, byAlias: map[string]*redact.Policy{}}
	for _, k := range c.Keys {
		if k.Redaction != "" {
			r.byKey[k.ID] = compiled[k.Redaction]
		}
	}
	for _, t := range c.Tenants {
		if t.Redaction != "" {
			r.byTenant[t.ID] = compiled[t.Redaction]
		}
	}
	for _, m := range c.Models {
		if m.Redaction != "" {
			r.byAlias[m.Alias] = compiled[m.Redaction]
		}
	}
	s.redaction = r
	return nil
}

// redactionPolicy is the union of the policies of a's key, tenant and
// alias; nil for none.
func (s *Snapshot) redactionPolicy(a *admission) *redact.Policy {
	r := s.redaction
	if r == nil {
		return nil
	}
	k := a.key()
	return redact.Merge(r.byKey[k.ID], r.byTenant[k.Tenant], r.byAlias[a.model])
}

// textPaths are where a caller's request holds text, per protocol: a path
// is JSON member names, [] for each element of an array; a path ends at a
// string (a value of another type there is skipped, so "content" and
// "content[].text" cover both forms of a message's content). Embeddings and
// jobs are not redacted.
var textPaths = map[sluice.Protocol][][]string{
	sluice.ProtocolOpenAIChat: paths("messages[].content", "messages[].content[].text"),
	sluice.ProtocolAnthropic: paths("system", "system[].text", "messages[].content", "messages[].content[].text",
		"messages[].content[].content", "messages[].content[].content[].text"), // the last two: tool results
	sluice.ProtocolOpenAIResponses: paths("instructions", "input", "input[].content", "input[].content[].text",
		"input[].output"), // a function call's output
	sluice.ProtocolGemini: paths("contents[].parts[].text", "systemInstruction.parts[].text",
		"system_instruction.parts[].text"),
}

// deltaPaths are where each protocol's stream events carry answer text
// (Responses: only in its output_text delta events, see isTextDelta).
var deltaPaths = map[sluice.Protocol][][]string{
	sluice.ProtocolOpenAIChat:      paths("choices[].delta.content"),
	sluice.ProtocolAnthropic:       paths("delta.text"),
	sluice.ProtocolOpenAIResponses: paths("delta"),
	sluice.ProtocolGemini:          paths("candidates[].content.parts[].text"),
}

func paths(ps ...string) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		for _, name := range strings.Split(p, ".") {
			field, each := strings.CutSuffix(name, "[]")
			out[i] = append(out[i], field)
			if each {
				out[i] = append(out[i], "[]")
			}
		}
	}
	return out
}

// redact applies the request's redaction policy, if it has one, to every
// text part of its body, before any translation and before any claim: a
// value a block action catches refuses the request
// (sensitive_data_blocked, naming the detector); masked values are
// replaced in req.Body. It returns the session whose placeholders the
// answer gets back when the policy restores, else nil.
func (h *Handler) redact(a *admission, req *sluice.Request) (*redact.Session, error) {
	p := a.snap.redactionPolicy(a)
	if p == nil || textPaths[req.Protocol] == nil {
		return nil, nil
	}
	s := p.NewSession()
	body, err := rewriteStrings(req.Body, textPaths[req.Protocol], func(text string) string {
		out, findings := s.Apply(text)
		for _, f := range findings {
			if h.metrics != nil {
				h.metrics.RedactionFindings.WithLabelValues(f.Detector, f.Action.String()).Inc()
			}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	if d := s.Blocked(); d != "" {
		return nil, &sluice.Error{Code: sluice.CodeSensitiveDataBlocked, Msg: "the request's text holds a value that the " + d + " detector of its redaction policy blocks"}
	}
	req.Body = body
	if p.Restores() && s.Masked() {
		return s, nil
	}
	return nil, nil
}

// rewriteStrings returns body with each string at one of paths replaced by
// what rewrite returns for it (decoded); body itself when none changes.
func rewriteStrings(body []byte, paths [][]string, rewrite func(string) string) ([]byte, error) {
	var edits []edit
	var failed error
	for _, p := range paths {
		eachString(body, 0, p, func(start, end int) {
			var text string
			if err := json.Unmarshal(body[start:end], &text); err != nil {
				failed = err
				return
			}
			if out := rewrite(text); out != text {
				quoted, _ := json.Marshal(out) // a string always marshals
				edits = append(edits, edit{start, end, quoted})
			}
		})
	}
	if failed != nil {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "the request's text is not valid JSON", Err: failed}
	}
	if len(edits) == 0 {
		return body, nil
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	out := make([]byte, 0, len(body)+len(body)/8)
	last := 0
	for _, e := range edits {
		out = append(append(out, body[last:e.start]...), e.value...)
		last = e.end
	}
	return append(out, body[last:]...), nil
}

// edit replaces body[start:end] with value.
type edit struct {
	start, end int
	value      []byte
}

// eachString calls fn with the span, in v's enclosing document (v starts at
// off in it), of every string at path in v.
func eachString(v []byte, off int, path []string, fn func(start, end int)) {
	if len(v) == 0 {
		return
	}
	if len(path) == 0 {
		if v[0] == '"' {
			fn(off, off+len(v))
		}
		return
	}
	if path[0] == "[]" {
		jsonfield.Elements(v, func(start, end int) { eachString(v[start:end], off+start, path[1:], fn) })
		return
	}
	if v[0] != '{' {
		return
	}
	if start, end, ok, err := jsonfield.Find(v, path[0]); ok && err == nil {
		eachString(v[start:end], off+start, path[1:], fn)
	}
}
