package admin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
)

// keyStatuses is the order statuses are shown in.
var keyStatuses = []sluice.KeyStatus{sluice.KeyActive, sluice.KeyPending, sluice.KeyDisabled, sluice.KeyExpired, sluice.KeyRevoked}

// onceNote follows every plaintext key the CLI prints.
const onceNote = "This is the only time the key is shown: store it now, it cannot be shown again."

// keys runs "sluice keys …".
func (c *cli) keys(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing keys subcommand (create, list, show, disable, enable, revoke, rotate, expire, models)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "create":
		return c.keysCreate(args)
	case "list":
		return c.keysList(args)
	case "show":
		return c.keyAction(args, "show")
	case "disable", "enable", "revoke":
		return c.keyAction(args, sub)
	case "rotate":
		return c.keysRotate(args)
	case "expire":
		return c.keysExpire(args)
	case "models":
		return c.keysModels(args)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown keys subcommand %q", sub)}
}

func (c *cli) keysCreate(args []string) error {
	cmd := c.command("keys create", "--name NAME --tenant TENANT [--models a,b] [--priority CLASS] [--expires-in 24h | --expires-at RFC3339] [--id ID] [--pending]")
	var spec KeySpec
	var models, expiresAt string
	cmd.fs.StringVar(&spec.Name, "name", "", "the key's `NAME`, for people (required)")
	cmd.fs.StringVar(&spec.Tenant, "tenant", "", "the `TENANT` usage belongs to (required)")
	cmd.fs.StringVar(&models, "models", "", "comma-separated `ALIASES` the key may use (default: all)")
	cmd.fs.StringVar(&spec.Priority, "priority", "", "default priority `CLASS` (default: standard)")
	cmd.fs.StringVar(&spec.ExpiresIn, "expires-in", "", "expire after `DURATION`, e.g. 24h")
	cmd.fs.StringVar(&expiresAt, "expires-at", "", "expire at `TIME` (RFC 3339)")
	cmd.fs.StringVar(&spec.ID, "id", "", "stable `ID` (default: generated)")
	cmd.fs.BoolVar(&spec.Pending, "pending", false, "create the key pending; 'keys enable' activates it")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if spec.Name == "" || spec.Tenant == "" {
		return cmd.usage("--name and --tenant are required")
	}
	if expiresAt != "" {
		t, err := time.Parse(time.RFC3339, expiresAt)
		if err != nil {
			return cmd.usage("--expires-at %q is not an RFC 3339 time", expiresAt)
		}
		spec.ExpiresAt = t
	}
	spec.Models = splitList(models)
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	issued, err := cl.CreateKey(c.ctx, spec)
	if err != nil {
		return err
	}
	return c.printIssued(issued, "created")
}

func (c *cli) keysList(args []string) error {
	cmd := c.command("keys list", "")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	keys, err := cl.ListKeys(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(keys)
	}
	t := newTable(c.stdout)
	t.row("ID", "NAME", "TENANT", "STATUS", "PRIORITY", "MODELS", "EXPIRES", "PREFIX")
	for _, k := range keys {
		t.row(k.ID, k.Name, k.Tenant, string(k.Status), k.Priority, list(k.Models, "*"), expires(k.ExpiresAt), k.Prefix)
	}
	return t.flush()
}

// keyAction runs "keys show|disable|enable|revoke ID".
func (c *cli) keyAction(args []string, action string) error {
	cmd := c.command("keys "+action, "ID")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	var k *KeyRecord
	switch action {
	case "show":
		k, err = cl.Key(c.ctx, id)
	case "disable":
		k, err = cl.Disable(c.ctx, id)
	case "enable":
		k, err = cl.Enable(c.ctx, id)
	case "revoke":
		k, err = cl.Revoke(c.ctx, id)
	}
	if err != nil {
		return err
	}
	return c.printKey(k)
}

func (c *cli) keysRotate(args []string) error {
	cmd := c.command("keys rotate", "ID")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	issued, err := cl.Rotate(c.ctx, id)
	if err != nil {
		return err
	}
	return c.printIssued(issued, "rotated; the old key no longer works")
}

func (c *cli) keysExpire(args []string) error {
	cmd := c.command("keys expire", "ID [--in 1h | --at RFC3339 | --never]")
	var e Expiry
	var at string
	cmd.fs.StringVar(&e.In, "in", "", "expire after `DURATION` from now")
	cmd.fs.StringVar(&at, "at", "", "expire at `TIME` (RFC 3339)")
	cmd.fs.BoolVar(&e.Never, "never", false, "remove the expiry")
	pos, err := cmd.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if at != "" {
		if e.At, err = time.Parse(time.RFC3339, at); err != nil {
			return cmd.usage("--at %q is not an RFC 3339 time", at)
		}
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	k, err := cl.Expire(c.ctx, pos[0], e)
	if err != nil {
		return err
	}
	return c.printKey(k)
}

func (c *cli) keysModels(args []string) error {
	cmd := c.command("keys models", "ID (ALIAS[,ALIAS…] | --all)")
	all := cmd.fs.Bool("all", false, "allow every alias")
	pos, err := cmd.parse(args, 1, 1<<10)
	if err != nil {
		return err
	}
	models := splitList(strings.Join(pos[1:], ","))
	if *all == (len(models) > 0) {
		return cmd.usage("name the aliases or pass --all (not both)")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	k, err := cl.SetModels(c.ctx, pos[0], models)
	if err != nil {
		return err
	}
	return c.printKey(k)
}

// printIssued prints a created or rotated key with its plaintext, once.
func (c *cli) printIssued(issued *IssuedKey, what string) error {
	if c.json {
		fmt.Fprintln(c.stderr, onceNote)
		return c.printJSON(issued)
	}
	fmt.Fprintf(c.stdout, "Key %s %s.\n\n", issued.Record.ID, what)
	if err := c.printKey(&issued.Record); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\n  %s\n\n%s\n", issued.Key, onceNote)
	return nil
}

// printKey prints one key record.
func (c *cli) printKey(k *KeyRecord) error {
	if c.json {
		return c.printJSON(k)
	}
	t := newTable(c.stdout)
	t.row("ID:", k.ID)
	t.row("Name:", k.Name)
	t.row("Tenant:", k.Tenant)
	t.row("Status:", string(k.Status))
	t.row("Priority:", k.Priority)
	t.row("Models:", list(k.Models, "* (all)"))
	t.row("Expires:", expires(k.ExpiresAt))
	t.row("Prefix:", k.Prefix)
	t.row("Created:", when(k.CreatedAt))
	t.row("Updated:", when(k.UpdatedAt))
	return t.flush()
}

func expires(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return when(t)
}

// splitList splits "a, b,,c" into [a b c].
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// table aligns rows into columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }
