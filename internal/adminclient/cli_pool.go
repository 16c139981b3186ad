package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice"
)

// accountStatuses and credentialStatuses are the orders statuses are shown in.
var (
	accountStatuses    = []sluice.UpstreamStatus{sluice.UpstreamActive, sluice.UpstreamDisabled}
	credentialStatuses = []sluice.UpstreamStatus{sluice.UpstreamActive, sluice.UpstreamDraining, sluice.UpstreamDisabled, sluice.UpstreamRemoved}
)

// accounts runs "sluice accounts …".
func (c *cli) accounts(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing accounts subcommand (list, show, disable, enable, suspend, resume)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return listItems(c, "accounts", args, (*Client).Accounts,
			[]string{"ID", "SCOPE", "IN-FLIGHT/CAP", "WAITING", "COOLDOWN", "PROBE", "STATUS", "REASON"},
			func(a admin.AccountState) []string {
				return []string{a.ID, a.QuotaScope, strconv.Itoa(a.InFlight) + "/" + inFlightCap(a.Cap, "∞"),
					strconv.Itoa(a.Waiting), when(a.CoolingUntil), dash(a.Probe), string(a.Status), dash(a.Reason)}
			})
	case "show", "disable", "enable":
		return c.accountAction(args, sub)
	case "suspend", "resume":
		return c.accountSuspend(args, sub == "suspend")
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown accounts subcommand %q", sub)}
}

// credentials runs "sluice credentials …".
func (c *cli) credentials(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing credentials subcommand (list, show, disable, drain, enable, remove)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return listItems(c, "credentials", args, (*Client).Credentials,
			[]string{"ID", "ACCOUNT", "STATUS", "IN-FLIGHT", "COOLDOWN", "REASON"},
			func(cr admin.CredentialState) []string {
				return []string{cr.ID, cr.Account, string(cr.Status), strconv.Itoa(cr.InFlight), when(cr.CoolingUntil), dash(cr.Reason)}
			})
	case "show", "disable", "drain", "enable", "remove":
		return c.credentialAction(args, sub)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown credentials subcommand %q", sub)}
}

// listItems runs "sluice GROUP list": fetch lists the items, printed as
// JSON or as a table of header and one row per item.
func listItems[T any](c *cli, group string, args []string, fetch func(*Client, context.Context) ([]T, error), header []string, row func(T) []string) error {
	cmd := c.command(group+" list", "")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	items, err := fetch(cl, c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(items)
	}
	t := newTable(c.stdout)
	t.row(header...)
	for _, it := range items {
		t.row(row(it)...)
	}
	return t.flush()
}

// accountAction runs "accounts show|disable|enable ID".
func (c *cli) accountAction(args []string, action string) error {
	cmd := c.command("accounts "+action, "ID")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	var a *admin.AccountState
	if action == "show" {
		a, err = cl.Account(c.ctx, id)
	} else {
		a, err = cl.SetAccount(c.ctx, id, action)
	}
	if err != nil {
		return err
	}
	return c.printAccountState(a)
}

// printAccountState prints an upstream account's state.
func (c *cli) printAccountState(a *admin.AccountState) error {
	limit := inFlightCap(a.Cap, "unlimited")
	if a.QuotaScope == string(sluice.QuotaScopeCredential) && a.Cap > 0 {
		limit += " per credential"
	}
	err := c.printFields(a, [][2]string{
		{"ID", a.ID}, {"Quota scope", a.QuotaScope}, {"Status", string(a.Status)}, {"Reason", dash(a.Reason)},
		{"Since", when(a.Since)}, {"In flight", strconv.Itoa(a.InFlight)}, {"Cap", limit},
		{"Waiting", strconv.Itoa(a.Waiting)}, {"Cooling until", when(a.CoolingUntil)},
		{"Backoff level", strconv.Itoa(a.Level)}, {"Probe", dash(a.Probe)}, {"Cooled", seconds(a.CooledSeconds)},
		{"Credentials", list(a.Credentials, "none")}, {"Models", modelUnits(a.Models)},
	})
	if err != nil || c.json || a.Picture == nil {
		return err
	}
	return c.printPicture(a.Picture)
}

// printPicture prints an account's upstream picture: its credentials now,
// then a table per window, one row per credential and one for the account.
func (c *cli) printPicture(p *admin.UpstreamPicture) error {
	fmt.Fprintln(c.stdout)
	t := newTable(c.stdout)
	t.row("CREDENTIAL", "STATUS", "IN-FLIGHT", "COOLING UNTIL", "COOLED")
	for _, cr := range p.Credentials {
		t.row(cr.ID, string(cr.Status), strconv.Itoa(cr.InFlight), when(cr.CoolingUntil), seconds(cr.CooledSeconds))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if p.Error != "" {
		fmt.Fprintf(c.stdout, "\nExecutions: %s\n", p.Error)
	}
	for _, w := range p.Windows {
		fmt.Fprintf(c.stdout, "\nLast %s (%s to %s): limited by %s\n", w.Window, when(w.From), when(w.To), dash(w.Limited))
		t := newTable(c.stdout)
		t.row("CREDENTIAL", "EXECUTIONS", "OK", "RATE-LIMITED", "OTHER FAILURES", "CACHED SHARE", "MEAN OK")
		for _, cr := range w.Credentials {
			t.row(pictureRow(cr.ID, cr.UpstreamCounts)...)
		}
		t.row(pictureRow("(account)", w.Account)...)
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// pictureRow is the row of a credential's (or the account's) counts.
func pictureRow(name string, n admin.UpstreamCounts) []string {
	failed := make([]string, 0, len(n.Failed))
	for _, status := range slices.Sorted(maps.Keys(n.Failed)) {
		failed = append(failed, status+" "+strconv.FormatInt(n.Failed[status], 10))
	}
	return []string{name, strconv.FormatInt(n.Executions, 10), strconv.FormatInt(n.OK, 10), strconv.FormatInt(n.RateLimited, 10),
		list(failed, "-"), strconv.FormatFloat(100*n.CachedShare, 'f', 1, 64) + "%", strconv.FormatFloat(n.MeanOKMillis, 'f', 0, 64) + "ms"}
}

// seconds formats a count of seconds, "-" for none.
func seconds(s float64) string {
	if s == 0 {
		return "-"
	}
	return strconv.FormatFloat(s, 'f', 1, 64) + "s"
}

// modelUnits describes an account's per-model units on one line:
// "qwen-plus 1/2 cooling until …, qwen-max 0/∞".
func modelUnits(ms []admin.ModelUnitState) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		s := m.Model + " " + strconv.Itoa(m.InFlight) + "/" + inFlightCap(m.Cap, "∞")
		if !m.CoolingUntil.IsZero() {
			s += " cooling until " + when(m.CoolingUntil)
		}
		if m.Probe != "" {
			s += " probe " + m.Probe
		}
		parts = append(parts, s)
	}
	return list(parts, "none")
}

// credentialAction runs "credentials show|disable|drain|enable ID" and
// "credentials remove ID [--force]".
func (c *cli) credentialAction(args []string, action string) error {
	cmd := c.command("credentials "+action, "ID")
	var force bool
	if action == "remove" {
		cmd.synopsis += " [--force]"
		cmd.fs.BoolVar(&force, "force", false, "remove a draining credential although it holds claims, dropping its running work")
	}
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	var cr *admin.CredentialState
	if action == "show" {
		cr, err = cl.Credential(c.ctx, id)
	} else {
		cr, err = cl.SetCredential(c.ctx, id, action, force)
	}
	if err != nil {
		return err
	}
	return c.printFields(cr, [][2]string{
		{"ID", cr.ID}, {"Account", cr.Account}, {"Status", string(cr.Status)}, {"Reason", dash(cr.Reason)},
		{"Since", when(cr.Since)}, {"In flight", strconv.Itoa(cr.InFlight)},
		{"Cooling until", when(cr.CoolingUntil)}, {"Endpoints", list(cr.Endpoints, "none")}, {"Owner", cr.Owner.String()},
	})
}

// printFields prints v as JSON, or as one "Name: value" line per field.
func (c *cli) printFields(v any, fields [][2]string) error {
	if c.json {
		return c.printJSON(v)
	}
	t := newTable(c.stdout)
	for _, f := range fields {
		t.row(f[0]+":", f[1])
	}
	return t.flush()
}

// inFlightCap formats an in-flight cap; 0 is unlimited.
func inFlightCap(n int, unlimited string) string {
	if n == 0 {
		return unlimited
	}
	return strconv.Itoa(n)
}

// dash is s, or "-" when it is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
