package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// Validate checks a decoded catalog, after ApplyDefaults, and reports every
// problem at once (errors.Join), each prefixed with its path:
// `models[2].deployments[0].weight: must be > 0`. It checks values and
// ranges, unique IDs, that every reference names a record that exists, and
// that every secret can be read: lookupEnv answers for environment variables
// (nil means os.LookupEnv) and secret files are read from disk. Messages name
// variables and files, never a secret value or a URL that may hold a
// password. Validate does not modify c.
func Validate(c *Catalog, lookupEnv func(string) (string, bool)) error {
	return ValidateServing(c, lookupEnv, nil)
}

// Serves reports whether an endpoint speaking upstream can serve an alias
// of protocol caller: the same protocol, or a pair Sluice translates
// (package app's table says which).
type Serves func(caller, upstream sluice.Protocol) bool

// ValidateServing is Validate where serves says which endpoints can serve
// an alias: a deployment's endpoint must speak a protocol that serves the
// alias's. nil serves is the same protocol only.
func ValidateServing(c *Catalog, lookupEnv func(string) (string, bool), serves Serves) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if serves == nil {
		serves = func(caller, upstream sluice.Protocol) bool { return caller == upstream }
	}
	v := &validator{c: c, lookupEnv: lookupEnv, serves: serves}
	v.top()
	v.endpoints()
	v.accounts()
	v.credentials()
	v.accountModels()
	v.models()
	v.pools()
	v.taskTypes()
	v.profiles()
	v.taskPolicies()
	v.submitRates()
	v.billing()
	v.keys()
	v.tenants()
	v.events()
	v.telemetry()
	v.redactions()
	v.caches()
	return errors.Join(v.errs...)
}

// validator collects the problems of one catalog. Each pass indexes the IDs
// the later passes refer to, so the passes run in declaration order.
type validator struct {
	tasks     map[string]int // task type IDs
	c         *Catalog
	lookupEnv func(string) (string, bool)
	serves    Serves
	errs      []error

	endpointByID map[string]*Endpoint
	declared     map[string]bool // accounts listed under accounts:
	accountIDs   map[string]bool // declared, plus each credential without one
	aliases      map[string]bool
	poolIDs      map[string]bool

	plans map[string]bool // billing plan IDs
}

func (v *validator) addf(path, format string, args ...any) {
	v.errs = append(v.errs, errors.New(path+": "+fmt.Sprintf(format, args...)))
}

// secret reports an error from readSecret under the record at path.
func (v *validator) secret(path string, err error) {
	fe, ok := errors.AsType[*fieldError](err)
	if !ok {
		v.errs = append(v.errs, fmt.Errorf("%s: %w", path, err))
		return
	}
	if fe.field != "" {
		path += "." + fe.field
	}
	v.addf(path, "%s", fe.msg)
}

func (v *validator) top() {
	c := v.c
	switch c.Version {
	case 1:
	case 0:
		v.addf("version", "required; must be 1")
	default:
		v.addf("version", "must be 1, got %d", c.Version)
	}
	v.listen("server.listen", c.Server.Listen)
	v.listen("server.admin_listen", c.Server.AdminListen)
	// Port 0 asks the kernel for a free port, so two ":0" listeners do not clash.
	if _, port, err := net.SplitHostPort(c.Server.Listen); err == nil && port != "0" && c.Server.Listen == c.Server.AdminListen {
		v.addf("server.admin_listen", "must differ from server.listen")
	}
	if j := c.Server.Jobs; j.MaxAge < 0 || j.PollInterval < 0 || j.Retention < 0 {
		v.addf("server.jobs", "durations must be > 0")
	} else if j.MaxPollInterval < j.PollInterval {
		v.addf("server.jobs.max_poll_interval", "must be at least poll_interval (%s)", j.PollInterval.D())
	}
	if c.Server.MaxBodyBytes <= 0 {
		v.addf("server.max_body_bytes", "must be > 0")
	} else if c.Server.MaxInflightBodyBytes < c.Server.MaxBodyBytes {
		v.addf("server.max_inflight_body_bytes", "must be at least max_body_bytes (%d)", c.Server.MaxBodyBytes)
	}
	for name := range c.Server.Priorities {
		if !slices.Contains(sluice.Priorities, name) {
			v.addf("server.priorities."+name, "unknown priority class; must be one of %v", sluice.Priorities)
		}
	}
	v.adminTokens()
	v.keyPaths("server.default_key_paths", c.Server.DefaultKeyPaths)

	if c.Server.ShutdownGrace < 0 {
		v.addf("server.shutdown_grace", "must be > 0")
	}
	if c.Server.KeyStaleness < 0 {
		v.addf("server.key_staleness", "must be > 0")
	}

	v.state()

	d := c.Database
	u, at := v.url("database", d.URL, d.URLEnv, d.URLFile)
	switch s := scheme(u); {
	case u == "":
	case s == "postgres" || s == "postgresql":
		if _, err := url.Parse(u); err != nil {
			// url.Error quotes the whole URL, password included.
			v.addf(at, "not a valid %s URL", s)
		}
	case s == "sqlite":
		if strings.TrimPrefix(u, "sqlite://") == "" {
			v.addf(at, "sqlite:// needs a file path, e.g. sqlite://data/sluice.db")
		}
	default:
		v.addf(at, "must start with sqlite://, postgres:// or postgresql://")
	}
}

// adminTokens checks server.admin_token_env and server.admin_tokens
// together: every token has its own ID and its own secret, since the audit
// log names the token that made each change.
func (v *validator) adminTokens() {
	srv := &v.c.Server
	bySecret := make(map[string]string) // secret → path of its first token; the values never leave this function
	if name := srv.AdminTokenEnv; name != "" {
		if s, ok := v.lookupEnv(name); !ok || strings.TrimSpace(s) == "" {
			v.addf("server.admin_token_env", "environment variable %s is not set or empty", name)
		} else {
			bySecret[s] = "server.admin_token_env"
		}
	}
	ids := v.unique("server.admin_tokens", "id", len(srv.AdminTokens), func(i int) string { return srv.AdminTokens[i].ID })
	if i, taken := ids[AdminTokenEnvID]; taken && srv.AdminTokenEnv != "" {
		v.addf(fmt.Sprintf("server.admin_tokens[%d].id", i), "%q is the ID of the token server.admin_token_env names; choose another", AdminTokenEnvID)
	}
	for i := range srv.AdminTokens {
		t := &srv.AdminTokens[i]
		at := fmt.Sprintf("server.admin_tokens[%d]", i)
		if t.Role != RoleRead && t.Role != RoleWrite {
			v.addf(at+".role", "must be %s or %s, got %q", RoleRead, RoleWrite, t.Role)
		}
		s, err := readSecret(t.SecretEnv, t.SecretFile, v.lookupEnv)
		switch first, dup := bySecret[s]; {
		case err != nil:
			v.secret(at, err)
		case dup:
			v.addf(at, "has the same secret as %s", first)
		default:
			bySecret[s] = at
		}
	}
}

// url reads the URL of the record at path from whichever of its url, url_env
// and url_file is set. It returns the URL and the path of that field, or ""
// after reporting why there is none.
func (v *validator) url(path, inline, env, file string) (u, at string) {
	u, field, err := readURL(inline, env, file, v.lookupEnv)
	if err != nil {
		v.secret(path, err)
		return "", ""
	}
	return u, path + "." + field
}

// listen checks a listen address: host:port, the host may be empty.
func (v *validator) listen(path, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.addf(path, "want host:port, got %q", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.addf(path, "invalid port %q in %q", port, addr)
	}
}

func (v *validator) endpoints() {
	v.endpointByID = make(map[string]*Endpoint)
	first := v.unique("endpoints", "id", len(v.c.Endpoints), func(i int) string { return v.c.Endpoints[i].ID })
	for id, i := range first {
		v.endpointByID[id] = &v.c.Endpoints[i]
	}
	for i := range v.c.Endpoints {
		e := &v.c.Endpoints[i]
		at := fmt.Sprintf("endpoints[%d]", i)
		// The URL is not quoted back: it might carry user info.
		u, err := url.Parse(e.BaseURL)
		switch {
		case e.BaseURL == "":
			v.addf(at+".base_url", "required")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.addf(at+".base_url", "must be an absolute http:// or https:// URL")
		case u.User != nil:
			v.addf(at+".base_url", "must not contain user info; use a credential")
		}
		if len(e.Protocols) == 0 {
			v.addf(at+".protocols", "must list at least one protocol")
		}
		for j, p := range e.Protocols {
			if !sluice.Protocol(p).Known() {
				v.addf(fmt.Sprintf("%s.protocols[%d]", at, j), "unknown protocol %q", p)
			}
		}
		for j, m := range e.Models {
			if m == "" {
				v.addf(fmt.Sprintf("%s.models[%d]", at, j), "must not be empty")
			}
		}
		if e.Breaker.Failures <= 0 {
			v.addf(at+".breaker.failures", "must be > 0")
		}
		v.endpointHeaders(at, e)
		v.cloud(at, e)
	}
}

func (v *validator) accounts() {
	v.declared = make(map[string]bool)
	v.accountIDs = make(map[string]bool)
	for id := range v.unique("accounts", "id", len(v.c.Accounts), func(i int) string { return v.c.Accounts[i].ID }) {
		v.declared[id] = true
		v.accountIDs[id] = true
	}
	for i := range v.c.Accounts {
		a := &v.c.Accounts[i]
		at := fmt.Sprintf("accounts[%d]", i)
		switch sluice.QuotaScope(a.QuotaScope) {
		case sluice.QuotaScopeAccount, sluice.QuotaScopeCredential:
		default:
			v.addf(at+".quota_scope", "must be account or credential, got %q", a.QuotaScope)
		}
		v.accountCap(at, a.MaxInflight)
		v.limits(at, 0, a.RPM, a.TPM) // max_inflight: accountCap
		if a.Cooldown.Base > a.Cooldown.Max {
			v.addf(at+".cooldown.base", "%s exceeds cooldown.max %s", a.Cooldown.Base.D(), a.Cooldown.Max.D())
		}
		reserved := 0
		for name, n := range a.Reserve {
			switch {
			case name != "interactive" && name != "standard":
				v.addf(at+".reserve."+name, "only interactive and standard can have slots reserved")
			case n < 0:
				v.addf(at+".reserve."+name, "must be >= 0")
			}
			reserved += n
		}
		if reserved > 0 && reserved >= a.Cap() {
			v.addf(at+".reserve", "reserves %d slots; needs max_inflight above that", reserved)
		}
	}
}

func (v *validator) credentials() {
	v.unique("credentials", "id", len(v.c.Credentials), func(i int) string { return v.c.Credentials[i].ID })
	for i := range v.c.Credentials {
		cr := &v.c.Credentials[i]
		at := fmt.Sprintf("credentials[%d]", i)
		switch {
		case cr.Account == "" && v.declared[cr.ID]:
			// Without an account the credential is its own account, whose ID
			// would be the declared account's.
			v.addf(at+".account", "required: id %q is also a declared account (set account: %s, or rename)", cr.ID, cr.ID)
		case cr.Account == "" && cr.ID != "":
			v.accountIDs[cr.ID] = true
		case cr.Account != "" && !v.declared[cr.Account]:
			v.addf(at+".account", "unknown account %q", cr.Account)
		}
		if cr.AWS != nil {
			v.awsCredential(at, cr)
		} else {
			v.credentialSecret(at, cr)
			v.bedrockCredentials(at, cr)
		}
		v.headers(at+".headers", cr.Headers)
		v.chatgptCredential(at, cr)
		v.endpointRefs(at+".endpoints", cr.Endpoints)
		for j, m := range cr.Models {
			if m == "" {
				v.addf(fmt.Sprintf("%s.models[%d]", at, j), "must not be empty")
			}
		}
		if cr.Account == "" {
			v.accountCap(at, cr.MaxInflight)
		} else if cr.Cap() < 0 {
			v.addf(at+".max_inflight", "must be >= 0")
		}
	}
	v.owners()
	v.secretKey()
}

// accountCap checks the max_inflight of an upstream account (or of a
// credential that is its own account) at path: unset takes the default,
// and 0, which once meant uncapped, is refused rather than guessed at.
func (v *validator) accountCap(at string, n *int) {
	switch {
	case n == nil:
	case *n == 0:
		v.addf(at+".max_inflight", "must be > 0; leave it out for the default (%d), or write a large number (e.g. 1000000) to mean uncapped", DefaultMaxInflight)
	case *n < 0:
		v.addf(at+".max_inflight", "must be > 0")
	}
}

// endpointRefs checks a non-empty list of endpoint IDs that must exist.
func (v *validator) endpointRefs(path string, ids []string) {
	if len(ids) == 0 {
		v.addf(path, "must list at least one endpoint")
	}
	for j, id := range ids {
		if v.endpointByID[id] == nil {
			v.addf(fmt.Sprintf("%s[%d]", path, j), "unknown endpoint %q", id)
		}
	}
}

// unique checks that each of n records has a well-formed ID that no earlier
// record has. It returns the index of the first record of each ID.
func (v *validator) unique(list, field string, n int, id func(int) string) map[string]int {
	first := make(map[string]int, n)
	for i := range n {
		s := id(i)
		path := fmt.Sprintf("%s[%d].%s", list, i, field)
		if j, dup := first[s]; dup {
			v.addf(path, "duplicate %s %q (first at %s[%d])", field, s, list, j)
			continue
		}
		if msg := checkID(s, field == "id"); msg != "" {
			v.addf(path, "%s", msg)
			continue
		}
		first[s] = i
	}
	return first
}

// checkID returns what is wrong with an ID, or "": a stable ID by CheckID;
// a model alias, a name callers send, may hold any character.
func checkID(s string, stable bool) string {
	if s == "" {
		return "required"
	}
	if !stable {
		return ""
	}
	return CheckID(s)
}

// limits checks the max_inflight, rpm and tpm of the record at path; 0 means
// no limit.
// tenants checks the tenants' limits; a tenant needs no declaration to
// exist (keys name it), only to have limits.
func (v *validator) tenants() {
	v.unique("tenants", "id", len(v.c.Tenants), func(i int) string { return v.c.Tenants[i].ID })
	for i, t := range v.c.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		if t.Weight < 0 {
			v.addf(at+".weight", "must be >= 0")
		}
		v.limitSet(at+".limits", t.Limits)
	}
}

// taskTypes checks the task types and indexes them for the keys.
func (v *validator) taskTypes() {
	v.tasks = v.unique("task_types", "id", len(v.c.TaskTypes), func(i int) string { return v.c.TaskTypes[i].ID })
	for i, tt := range v.c.TaskTypes {
		v.limitSet(fmt.Sprintf("task_types[%d].limits", i), tt.Limits)
	}
}

// limitSet checks a limits block.
func (v *validator) limitSet(at string, l Limits) {
	v.limits(at, l.MaxInflight, l.RPM, l.TPM)
	if l.DailyTokens < 0 {
		v.addf(at+".daily_tokens", "must be >= 0")
	}
}

func (v *validator) limits(at string, maxInflight, rpm, tpm int) {
	if maxInflight < 0 {
		v.addf(at+".max_inflight", "must be >= 0")
	}
	if rpm < 0 {
		v.addf(at+".rpm", "must be >= 0")
	}
	if tpm < 0 {
		v.addf(at+".tpm", "must be >= 0")
	}
}

// scheme returns the lowercased scheme of a URL ("postgres"), or "" when s
// has none. Only the scheme is ever quoted back, never the rest.
func scheme(s string) string {
	before, _, ok := strings.Cut(s, "://")
	if !ok || before == "" {
		return ""
	}
	for i, r := range before {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return ""
		}
	}
	return strings.ToLower(before)
}
