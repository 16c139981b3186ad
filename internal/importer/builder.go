package importer

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/config"
)

// builder is what every source's import shares: the catalog being made,
// its report, and the IDs, secrets and endpoints given so far.
type builder struct {
	report       Report
	catalog      config.Catalog
	ids          map[string]bool // "kind/id" of every ID given so far, to keep them unique
	secretEnv    map[string]bool // variables already listed in the report
	endpoints    map[string]int  // endpoint identity → index in catalog.Endpoints
	endpointByID map[string]int
}

func newBuilder(source string) builder {
	return builder{
		report:       Report{Source: source},
		catalog:      config.Catalog{Version: 1},
		ids:          map[string]bool{},
		secretEnv:    map[string]bool{},
		endpoints:    map[string]int{},
		endpointByID: map[string]int{},
	}
}

// endpointFor returns the ID of the endpoint of (provider, base URL, Azure
// API version), adding it the first time: deployments on one upstream
// share its endpoint and so its health.
func (b *builder) endpointFor(prov provider, base, version string) string {
	identity := prov.name + " " + base + " " + version
	if i, ok := b.endpoints[identity]; ok {
		return b.catalog.Endpoints[i].ID
	}
	host := base
	if u, err := url.Parse(base); err == nil {
		host = u.Hostname()
	}
	ep := config.Endpoint{ID: b.newID("endpoint", prov.name+"-"+strings.Split(host, ".")[0]), BaseURL: base, Protocols: prov.protocols}
	if version != "" {
		ep.Azure = &config.Azure{APIVersion: version}
	}
	b.endpoints[identity] = len(b.catalog.Endpoints)
	b.endpointByID[ep.ID] = len(b.catalog.Endpoints)
	b.catalog.Endpoints = append(b.catalog.Endpoints, ep)
	return ep.ID
}

func (b *builder) addSecret(env, what, from string) {
	if b.secretEnv[env] {
		return
	}
	b.secretEnv[env] = true
	b.report.Secrets = append(b.report.Secrets, Secret{Env: env, For: what, From: from})
}

// newID returns base made a valid stable ID unused among those of kind.
func (b *builder) newID(kind, base string) string {
	base = slug(base)
	id := base
	for n := 2; b.ids[kind+"/"+id]; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	b.ids[kind+"/"+id] = true
	return id
}

// slug keeps letters, digits, '.', '_' and '-' (config.CheckID's alphabet)
// and turns anything else into '-'.
func slug(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-")
	if out == "" {
		return "imported"
	}
	if len(out) > config.MaxID {
		out = out[:config.MaxID]
	}
	return out
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
