package adminclient

import (
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/internal/admin"
)

// Synopses of the suspend and resume verbs.
const (
	suspendSynopsis = "ID --reason TEXT"
	resumeSynopsis  = "ID"
)

// suspendArgs parses "ID [--reason TEXT]" of a suspend (reason required)
// or a resume (no reason).
func (cmd *command) suspendArgs(args []string, suspend bool) (id, reason string, cl *Client, err error) {
	if suspend {
		cmd.fs.StringVar(&reason, "reason", "", "why (required): shown to operators and kept in the audit log, never to callers")
	}
	if id, cl, err = cmd.oneID(args); err != nil {
		return "", "", nil, err
	}
	if suspend && reason == "" {
		return "", "", nil, cmd.usage("--reason is required")
	}
	return id, reason, cl, nil
}

// billingSuspend runs "sluice billing suspend ACCOUNT --reason TEXT" and
// "sluice billing resume ACCOUNT".
func (cmd *command) billingSuspend(args []string, suspend bool) error {
	id, reason, cl, err := cmd.suspendArgs(args, suspend)
	if err != nil {
		return err
	}
	var a *admin.BillingAccount
	if suspend {
		a, err = cl.SuspendBillingAccount(cmd.ctx, id, reason)
	} else {
		a, err = cl.ResumeBillingAccount(cmd.ctx, id)
	}
	if err != nil {
		return err
	}
	return cmd.printAccount(a)
}

// tenants runs "sluice tenants …".
func (c *cli) tenants(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing tenants subcommand (list, show, suspend, resume)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return listItems(c, "tenants", args, (*Client).Tenants, []string{"ID", "KEYS", "SUSPENDED", "REASON"},
			func(t admin.Tenant) []string {
				return []string{t.ID, strconv.Itoa(t.Keys), suspendedSince(t.Suspension), suspendedWhy(t.Suspension)}
			})
	case "show", "suspend", "resume":
		return c.tenantAction(args, sub)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown tenants subcommand %q", sub)}
}

// tenantAction runs "tenants show|resume ID" and "tenants suspend ID --reason TEXT".
func (c *cli) tenantAction(args []string, action string) error {
	synopsis := map[string]string{"show": "ID", "suspend": suspendSynopsis, "resume": resumeSynopsis}[action]
	cmd := c.command("tenants "+action, synopsis)
	var (
		t                *admin.Tenant
		id, reason       string
		cl               *Client
		err              error
		suspend, resumes = action == "suspend", action == "resume"
	)
	if suspend || resumes {
		id, reason, cl, err = cmd.suspendArgs(args, suspend)
	} else {
		id, cl, err = cmd.oneID(args)
	}
	if err != nil {
		return err
	}
	switch {
	case suspend:
		t, err = cl.SuspendTenant(c.ctx, id, reason)
	case resumes:
		t, err = cl.ResumeTenant(c.ctx, id)
	default:
		t, err = cl.Tenant(c.ctx, id)
	}
	if err != nil {
		return err
	}
	return c.printFields(t, [][2]string{{"ID", t.ID}, {"Keys", strconv.Itoa(t.Keys)}, {"Suspended", suspendedSince(t.Suspension)},
		{"Reason", suspendedWhy(t.Suspension)}})
}

// accountSuspend runs "accounts suspend ID --reason TEXT" and "accounts resume ID".
func (c *cli) accountSuspend(args []string, suspend bool) error {
	synopsis, action := resumeSynopsis, "resume"
	if suspend {
		synopsis, action = suspendSynopsis, "suspend"
	}
	cmd := c.command("accounts "+action, synopsis)
	id, reason, cl, err := cmd.suspendArgs(args, suspend)
	if err != nil {
		return err
	}
	var a *admin.AccountState
	if suspend {
		a, err = cl.SuspendAccount(c.ctx, id, reason)
	} else {
		a, err = cl.ResumeAccount(c.ctx, id)
	}
	if err != nil {
		return err
	}
	return c.printAccountState(a)
}

// suspendedSince says since when and by whom sp was suspended, or "no".
func suspendedSince(sp *admin.Suspension) string {
	if sp == nil {
		return "no"
	}
	return when(sp.Since) + " by " + dash(sp.By)
}

// suspendedWhy is sp's reason, or "-".
func suspendedWhy(sp *admin.Suspension) string {
	if sp == nil {
		return "-"
	}
	return sp.Reason
}
