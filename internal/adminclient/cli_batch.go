package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"fmt"
	"maps"
	"slices"
	"strings"
)

// batchSynopses are the usage lines of the batch forms of "sluice keys".
var batchSynopses = map[string]string{
	"disable":    "--selector SELECTOR [--dry-run]",
	"enable":     "--selector SELECTOR [--dry-run]",
	"set-policy": "--selector SELECTOR --policy MODE [--accounts a,b] [--pool ID] [--fallback POOL|any] [--wait DURATION] [--dry-run]",
	"set-limits": "--selector SELECTOR --limits rpm=N,tpm=N,max_inflight=N,daily_tokens=N [--dry-run]",
}

// isBatch reports whether "sluice keys SUB ARGS…" is a batch by label
// selector: set-policy and set-limits always are, disable and enable when
// given --selector.
func isBatch(sub string, args []string) bool {
	switch sub {
	case "set-policy", "set-limits":
		return true
	case "disable", "enable":
		return slices.ContainsFunc(args, func(a string) bool {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			return strings.HasPrefix(a, "-") && name == "selector"
		})
	}
	return false
}

// keysBatch runs "sluice keys disable|enable|set-policy|set-limits
// --selector SELECTOR [--dry-run]".
func (c *cli) keysBatch(sub string, args []string) error {
	cmd := c.command("keys "+sub, batchSynopses[sub])
	selector := cmd.fs.String("selector", "", "label `SELECTOR` of the keys to change, e.g. team=web,env!=prod (required)")
	dryRun := cmd.fs.Bool("dry-run", false, "change nothing: list the keys it would change, and how")
	var sf *settingsFlags
	if sub == "set-policy" || sub == "set-limits" {
		sf = newSettingsFlags(cmd.fs)
	}
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if *selector == "" {
		return cmd.usage("--selector is required")
	}
	b := admin.Batch{Selector: *selector, Operation: strings.ReplaceAll(sub, "-", "_"), DryRun: *dryRun}
	if sf != nil {
		change, err := sf.change(cmd)
		if err != nil {
			return err
		}
		switch {
		case sub == "set-policy" && change.Policy != nil && change == (admin.KeyChange{Policy: change.Policy}):
			b.Policy = change.Policy
		case sub == "set-limits" && change.Limits != nil && change == (admin.KeyChange{Limits: change.Limits}):
			b.Limits = change.Limits
		default:
			return cmd.usage("keys %s takes the flags %s, and no others", sub, batchSynopses[sub])
		}
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	res, err := cl.Batch(c.ctx, b)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(res)
	}
	return c.printBatch(res)
}

// printBatch prints what a batch changed, or in a dry run would change:
// after the first line, a dry run and the run it previews print the same.
func (c *cli) printBatch(res *admin.BatchResult) error {
	verb := "changed"
	if res.DryRun {
		verb = "would change (dry run; nothing was changed)"
	}
	fmt.Fprintf(c.stdout, "%s on %s %s %d key(s):\n", res.Operation, res.Selector, verb, len(res.Changed))
	t := newTable(c.stdout)
	for _, d := range res.Changed {
		for i, field := range slices.Sorted(maps.Keys(d.Fields)) {
			id := d.ID
			if i > 0 {
				id = ""
			}
			t.row("  "+id, field+":", string(d.Fields[field].Before), "→", string(d.Fields[field].After))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(res.Unchanged) > 0 {
		fmt.Fprintf(c.stdout, "already so: %s\n", strings.Join(res.Unchanged, ", "))
	}
	if len(res.Skipped) > 0 {
		fmt.Fprintln(c.stdout, "skipped:")
		t := newTable(c.stdout)
		for _, s := range res.Skipped {
			t.row("  "+s.ID, s.Reason)
		}
		return t.flush()
	}
	return nil
}
