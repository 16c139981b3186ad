// Package archtest checks that non-test imports between Sluice's packages
// point down the pipeline (docs/architecture.md, "Package layout"): no stage imports
// pipeline, ingress or app, only app imports store implementations, and the
// sluice package imports none of ours.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// layers lists our packages from the top of the pipeline down; a package may
// import only packages in a later layer. Packages in one layer may not import
// each other.
var layers = [][]string{
	{"cmd/sluice"},
	{"internal/app"},
	{"internal/adminclient", "internal/importer"},
	{"internal/ingress", "internal/admin", "internal/simulator"},
	{"internal/pipeline"},
	{"internal/authn", "internal/routing", "internal/settle", "internal/oauth", "internal/events", "internal/validate"},
	{"internal/upstream", "internal/capacity"},
	{"internal/breaker", "internal/metrics", "internal/telemetry"},
	{"internal/adapter/anthropic", "internal/adapter/gemini", "internal/adapter/responses"},
	{"internal/adapter/openai"},
	{"internal/adapter"},
	{"internal/protocol/anthropic", "internal/protocol/gemini", "internal/protocol/openai"},
	{"internal/protocol"},
	{"internal/sse", "internal/jsonfield", "internal/jsonvalid", "internal/console"},
	{"internal/config"},
	{"internal/catalog/memcatalog", "internal/catalog/sqlcatalog", "internal/ledger/memledger", "internal/ledger/sqlledger",
		"internal/store/memstore", "internal/store/redisstore", "internal/store/sqlstore", "internal/store/degraded"},
	{"internal/sqldb"},
	{"internal/catalog", "internal/ledger", "internal/store"},
	{"internal/billing", "internal/periodic", "internal/redact", "internal/respcache"},
	{""}, // package sluice
}

// implementations may be imported by app (and tests) only.
var implementations = []string{
	"internal/catalog/memcatalog", "internal/catalog/sqlcatalog",
	"internal/ledger/memledger", "internal/ledger/sqlledger", "internal/sqldb", "internal/simulator", "internal/oauth", "internal/events",
	"internal/store/memstore", "internal/store/redisstore", "internal/store/sqlstore", "internal/store/degraded",
	"internal/adapter/anthropic", "internal/adapter/gemini", "internal/adapter/openai", "internal/adapter/responses",
}

// testOnly are helper packages no production code may import.
var testOnly = []string{"internal/testenv", "internal/adapter/adaptertest", "internal/catalog/catalogtest", "internal/ledger/ledgertest", "internal/sqldb/sqldbtest", "internal/store/storetest",
	"internal/store/storetest/history", "internal/store/storemodel"}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rank := map[string]int{}
	for i, layer := range layers {
		for _, p := range layer {
			rank[p] = i
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := rel(fields[0])
		// deploy holds only the tests of the deployment files.
		if isAny(pkg, testOnly) || pkg == "bench" || strings.HasPrefix(pkg, "bench/") || pkg == "internal/archtest" || pkg == "deploy" {
			continue
		}
		from, known := rank[pkg]
		if !known {
			t.Errorf("package %s is in no layer: add it to archtest's layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := rel(imp)
			switch {
			case isAny(dep, testOnly):
				t.Errorf("%s imports test helper %s", pkg, dep)
			case isAny(dep, implementations) && pkg != "internal/app" && !isAny(pkg, implementations):
				t.Errorf("%s imports implementation %s: only app may", pkg, dep)
			case rank[dep] <= from:
				t.Errorf("%s imports %s, which is not below it", pkg, dep)
			}
		}
	}
}

func rel(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}

func isAny(p string, list []string) bool {
	for _, v := range list {
		if p == v {
			return true
		}
	}
	return false
}
