package admin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
)

// cliVerbs names, for every admin route, the CLI command that calls it
// (as `sluice help` spells it).
var cliVerbs = map[string]string{
	"GET /admin/status":                               "sluice status",
	"GET /admin/catalog":                              "sluice catalog show",
	"PUT /admin/catalog":                              "sluice apply",
	"GET /admin/catalog/versions":                     "sluice catalog history",
	"GET /admin/catalog/versions/{version}":           "sluice catalog show",
	"GET /admin/catalog/versions/{version}/diff":      "sluice catalog diff",
	"POST /admin/catalog/versions/{version}/rollback": "sluice catalog rollback",
	"POST /admin/keys":                                "sluice keys create",
	"GET /admin/keys":                                 "sluice keys list",
	"GET /admin/keys/{id}":                            "sluice keys show",
	"POST /admin/keys/batch":                          "sluice keys set-policy",
	"POST /admin/keys/{id}/disable":                   "sluice keys disable",
	"POST /admin/keys/{id}/enable":                    "sluice keys disable|enable",
	"POST /admin/keys/{id}/revoke":                    "sluice keys disable|enable|revoke",
	"POST /admin/keys/{id}/rotate":                    "sluice keys disable|enable|revoke|rotate",
	"POST /admin/keys/{id}/expire":                    "sluice keys expire",
	"PUT /admin/keys/{id}/models":                     "sluice keys models",
	"PATCH /admin/keys/{id}":                          "sluice keys update",
	"GET /admin/accounts":                             "sluice accounts list",
	"GET /admin/accounts/{id}":                        "sluice accounts show",
	"POST /admin/accounts/{id}/disable":               "sluice accounts show|disable",
	"POST /admin/accounts/{id}/enable":                "sluice accounts show|disable|enable",
	"GET /admin/credentials":                          "sluice credentials list",
	"GET /admin/credentials/{id}":                     "sluice credentials show",
	"POST /admin/credentials/{id}/disable":            "sluice credentials show|disable",
	"POST /admin/credentials/{id}/drain":              "sluice credentials show|disable|drain",
	"POST /admin/credentials/{id}/enable":             "sluice credentials show|disable|drain|enable",
	"POST /admin/credentials/{id}/remove":             "sluice credentials remove",
	"GET /admin/usage":                                "sluice usage list",
	"GET /admin/usage/summary":                        "sluice usage summary",
	"GET /admin/usage/policy":                         "sluice usage policy",
	"GET /admin/usage/cache":                          "sluice usage cache",
	"GET /admin/audit":                                "sluice audit",
	"GET /admin/jobs":                                 "sluice jobs list",
	"GET /admin/jobs/{id}":                            "sluice jobs show",
	"GET /admin/affinity":                             "sluice affinity show",
	"GET /admin/billing/accounts":                     "sluice billing accounts",
	"GET /admin/billing/accounts/{id}":                "sluice billing show",
	"PUT /admin/billing/accounts/{id}":                "sluice billing create",
	"POST /admin/billing/accounts/{id}/topup":         "sluice billing topup",
	"POST /admin/billing/accounts/{id}/adjust":        "sluice billing adjust",
	"POST /admin/billing/accounts/{id}/refund":        "sluice billing refund",
	"GET /admin/billing/accounts/{id}/statement":      "sluice billing statement",
	"GET /admin/billing/prices":                       "sluice billing prices",
	"POST /admin/billing/prices":                      "sluice billing apply-price",
	"GET /admin/billing/spend":                        "sluice billing report",
	"POST /admin/billing/accounts/{id}/suspend":       "sluice billing suspend",
	"POST /admin/billing/accounts/{id}/resume":        "sluice billing resume",
	"GET /admin/tenants":                              "sluice tenants list",
	"GET /admin/tenants/{id}":                         "sluice tenants show",
	"POST /admin/tenants/{id}/suspend":                "sluice tenants suspend",
	"POST /admin/tenants/{id}/resume":                 "sluice tenants resume",
	"POST /admin/accounts/{id}/suspend":               "sluice accounts suspend",
	"POST /admin/accounts/{id}/resume":                "sluice accounts resume",
	"GET /admin/entitlements":                         "sluice entitlements list",
	"PUT /admin/entitlements":                         "sluice entitlements put",
	"DELETE /admin/entitlements":                      "sluice entitlements delete",
	"GET /admin/profiles":                             "sluice entitlements profiles",
}

// TestEveryAdminRouteHasACLIVerb: a route added without a command fails
// here, and so does a command the help no longer shows.
func TestEveryAdminRouteHasACLIVerb(t *testing.T) {
	var help, errs bytes.Buffer
	if code := adminclient.RunCLI(context.Background(), []string{"help"}, &help, &errs, func(string) string { return "" }); code != 0 {
		t.Fatalf("sluice help = %d: %s", code, errs.String())
	}
	for _, rt := range admin.Routes(newHarness(t).handler) {
		verb, ok := cliVerbs[rt[0]]
		if !ok {
			t.Errorf("route %s has no CLI command in cliVerbs", rt[0])
			continue
		}
		if !strings.Contains(help.String(), verb) {
			t.Errorf("route %s: `sluice help` does not show %q", rt[0], verb)
		}
	}
}
