package admin

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// PolicyReport answers GET /admin/usage/policy: for each key, what its route
// policy meant (the expected accounts) against where its executions ran,
// over [From, To).
type PolicyReport struct {
	From time.Time         `json:"from"`
	To   time.Time         `json:"to"`
	Keys []KeyPolicyReport `json:"keys"` // by key ID; only keys with executions in the range
}

// KeyPolicyReport is one key's executions over the report's range.
type KeyPolicyReport struct {
	KeyID string `json:"key_id"`
	// Expected is every account the key's policy meant its executions for
	// in the range (the policy may have changed within it); [] = any.
	Expected []string `json:"expected"`
	PolicyTally
	Accounts []AccountPolicyReport `json:"accounts"` // by account, then credential
}

// AccountPolicyReport is the executions of one key on one account and
// credential.
type AccountPolicyReport struct {
	AccountID    string `json:"account_id"`
	CredentialID string `json:"credential_id"`
	PolicyTally
}

// PolicyTally counts executions by how they relate to the policy. An
// execution is on expected when it ran on an expected account (any account,
// for a policy that names none), a fallback when it ran outside them for a
// reason; Executions - OnExpected - Fallbacks ran outside them with no
// reason, which a policy never does on purpose.
type PolicyTally struct {
	Executions int            `json:"executions"`
	OnExpected int            `json:"on_expected"`
	Fallbacks  int            `json:"fallbacks"`
	Reasons    map[string]int `json:"fallback_reasons"` // fallbacks by reason: cooling, disabled, no_room, failed:<class>, breaker_open
}

func (t *PolicyTally) add(c *ledger.PolicyCount) {
	n := int(c.Executions)
	t.Executions += n
	switch {
	case c.OnExpected():
		t.OnExpected += n
	case c.Fallback != "":
		t.Fallbacks += n
		if t.Reasons == nil {
			t.Reasons = make(map[string]int)
		}
		t.Reasons[c.Fallback] += n
	}
}

// policyReport handles GET /admin/usage/policy?key=&from=&to=: from
// defaults to a day before to, to to now.
func (s *server) policyReport(w http.ResponseWriter, r *http.Request) error {
	if s.usage == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway records no usage")
	}
	q := r.URL.Query()
	f := ledger.PolicyFilter{KeyID: q.Get("key"), To: s.now().UTC()}
	if err := parseTime(q, "to", &f.To); err != nil {
		return err
	}
	f.From = f.To.Add(-defaultUsageWindow)
	if err := parseTime(q, "from", &f.From); err != nil {
		return err
	}
	if !f.From.Before(f.To) {
		return invalid("from %s is not before to %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	counts, err := s.usage.CountExecutions(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, policyReport(f, counts))
	return nil
}

// parseTime sets *t from the RFC 3339 query parameter name, when present.
func parseTime(q url.Values, name string, t *time.Time) error {
	v := q.Get(name)
	if v == "" {
		return nil
	}
	parsed, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return invalid("%s %q is not an RFC 3339 time", name, v)
	}
	*t = parsed.UTC()
	return nil
}

// policyReport tallies counts, which CountExecutions ordered by key,
// account and credential.
func policyReport(f ledger.PolicyFilter, counts []ledger.PolicyCount) PolicyReport {
	out := PolicyReport{From: f.From, To: f.To, Keys: []KeyPolicyReport{}}
	for i := range counts {
		c := &counts[i]
		if n := len(out.Keys); n == 0 || out.Keys[n-1].KeyID != c.KeyID {
			out.Keys = append(out.Keys, KeyPolicyReport{KeyID: c.KeyID, Expected: []string{}})
		}
		k := &out.Keys[len(out.Keys)-1]
		for _, a := range c.Expected {
			if !slices.Contains(k.Expected, a) {
				k.Expected = append(k.Expected, a)
			}
		}
		k.add(c)
		if n := len(k.Accounts); n == 0 || k.Accounts[n-1].AccountID != c.AccountID || k.Accounts[n-1].CredentialID != c.CredentialID {
			k.Accounts = append(k.Accounts, AccountPolicyReport{AccountID: c.AccountID, CredentialID: c.CredentialID})
		}
		k.Accounts[len(k.Accounts)-1].add(c)
	}
	for i := range out.Keys {
		slices.Sort(out.Keys[i].Expected)
	}
	return out
}
