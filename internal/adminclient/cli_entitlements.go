package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// entitlementSynopses are the usage lines of "sluice entitlements".
var entitlementSynopses = map[string]string{
	"list":     "[--tenant T] [--user U] [--profile P]",
	"set":      "TENANT USER PROFILE [--pool POOL] [--from RFC3339] [--until RFC3339] [--dry-run]",
	"put":      "-f FILE [--dry-run]   (FILE: a JSON array of {tenant, user, profile, pool, valid_from, valid_until})",
	"delete":   "TENANT USER [USER…] [--dry-run]",
	"profiles": "",
}

// entitlements runs "sluice entitlements list|set|put|delete|profiles".
func (c *cli) entitlements(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing subcommand: list, set, put, delete or profiles"}
	}
	sub, args := args[0], args[1:]
	synopsis, ok := entitlementSynopses[sub]
	if !ok {
		return usageError{msg: fmt.Sprintf("unknown entitlements subcommand %q", sub)}
	}
	cmd := c.command("entitlements "+sub, synopsis)
	switch sub {
	case "list":
		return cmd.listEntitlements(args)
	case "delete":
		return cmd.deleteEntitlements(args)
	case "profiles":
		return cmd.listProfiles(args)
	}
	return cmd.putEntitlements(sub, args)
}

func (cmd *command) listEntitlements(args []string) error {
	tenant := cmd.fs.String("tenant", "", "only the `TENANT`'s")
	user := cmd.fs.String("user", "", "only end users named `USER`")
	profile := cmd.fs.String("profile", "", "only those to `PROFILE`")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	es, err := cl.Entitlements(cmd.ctx, *tenant, *user, *profile)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(es)
	}
	t := newTable(cmd.stdout)
	t.row("TENANT", "USER", "PROFILE", "POOL", "FROM", "UNTIL", "NOW")
	for _, e := range es {
		now := "expired or not yet"
		if e.ValidNow {
			now = "valid"
		}
		t.row(e.Tenant, e.User, e.Profile, orDash(e.Pool), openTime(e.ValidFrom), openTime(e.ValidUntil), now)
	}
	return t.flush()
}

// putEntitlements runs "set" (one entitlement from the arguments) and
// "put" (many from a file).
func (cmd *command) putEntitlements(sub string, args []string) error {
	dryRun := cmd.fs.Bool("dry-run", false, "change nothing: say what would change")
	var pool, from, until, file *string
	if sub == "set" {
		pool = cmd.fs.String("pool", "", "the `POOL` that overrides the profile's")
		from = cmd.fs.String("from", "", "valid from `TIME` (RFC 3339; default: always)")
		until = cmd.fs.String("until", "", "valid until `TIME` (RFC 3339; default: forever)")
	} else {
		file = cmd.fs.String("f", "", "the JSON `FILE` of entitlements")
	}
	n := 0
	if sub == "set" {
		n = 3
	}
	pos, err := cmd.parse(args, n, n)
	if err != nil {
		return err
	}
	body := admin.EntitlementsPut{DryRun: *dryRun}
	if sub == "set" {
		e := admin.Entitlement{Tenant: pos[0], User: pos[1], Profile: pos[2], Pool: *pool}
		for _, f := range []struct {
			flag, value string
			to          *time.Time
		}{{"from", *from, &e.ValidFrom}, {"until", *until, &e.ValidUntil}} {
			if f.value == "" {
				continue
			}
			if *f.to, err = time.Parse(time.RFC3339, f.value); err != nil {
				return cmd.usage("--%s %q is not an RFC 3339 time", f.flag, f.value)
			}
		}
		body.Entitlements = []admin.Entitlement{e}
	} else {
		if *file == "" {
			return cmd.usage("-f FILE is required")
		}
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &body.Entitlements); err != nil {
			return fmt.Errorf("%s: want a JSON array of entitlements: %w", *file, err)
		}
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	res, err := cl.PutEntitlements(cmd.ctx, body)
	if err != nil {
		return err
	}
	return cmd.printEntitlementsResult(res)
}

func (cmd *command) deleteEntitlements(args []string) error {
	dryRun := cmd.fs.Bool("dry-run", false, "change nothing: say what would change")
	pos, err := cmd.parse(args, 2, admin.MaxEntitlementsPerCall+1)
	if err != nil {
		return err
	}
	body := admin.EntitlementsDelete{DryRun: *dryRun}
	for _, u := range pos[1:] {
		body.Users = append(body.Users, admin.EndUserRef{Tenant: pos[0], User: u})
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	res, err := cl.DeleteEntitlements(cmd.ctx, body)
	if err != nil {
		return err
	}
	return cmd.printEntitlementsResult(res)
}

func (cmd *command) printEntitlementsResult(res *admin.EntitlementsResult) error {
	if cmd.json {
		return cmd.printJSON(res)
	}
	verb := ""
	if res.DryRun {
		verb = " (dry run: nothing was changed)"
	}
	_, err := fmt.Fprintf(cmd.stdout, "created %d, replaced %d, deleted %d, unchanged %d%s\n",
		res.Created, res.Replaced, res.Deleted, res.Unchanged, verb)
	return err
}

// openTime shows a bound of a validity period; zero is open.
func openTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// listProfiles runs "profiles": the quota profiles entitlements name.
func (cmd *command) listProfiles(args []string) error {
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	ps, err := cl.Profiles(cmd.ctx)
	if err != nil {
		return err
	}
	if cmd.json {
		return cmd.printJSON(ps)
	}
	t := newTable(cmd.stdout)
	t.row("PROFILE", "IN FLIGHT", "RPM", "TPM", "TOKENS/DAY", "TASKS", "BONUS", "POOL", "DEFAULT FOR")
	for _, p := range ps {
		tasks := make([]string, 0, len(p.TaskLimits))
		for task, l := range p.TaskLimits {
			tasks = append(tasks, fmt.Sprintf("%s(inflight %d, day %d)", task, l.MaxInflight, l.DailyRequests))
		}
		slices.Sort(tasks)
		n := func(v int) string { // 0 is no limit
			if v == 0 {
				return "-"
			}
			return strconv.Itoa(v)
		}
		t.row(p.ID, n(p.UserLimits.MaxInflight), n(p.UserLimits.RPM), n(p.UserLimits.TPM), n(p.UserLimits.DailyTokens),
			orDash(strings.Join(tasks, " ")), strconv.Itoa(p.PriorityBonus), orDash(p.Pool), orDash(strings.Join(p.DefaultFor, ",")))
	}
	return t.flush()
}
