package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
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
		return usageError{msg: "missing keys subcommand (create, list, show, update, disable, enable, revoke, rotate, expire, models)"}
	}
	sub, args := args[0], args[1:]
	if isBatch(sub, args) {
		return c.keysBatch(sub, args)
	}
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
	case "update":
		return c.keysUpdate(args)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown keys subcommand %q", sub)}
}

func (c *cli) keysCreate(args []string) error {
	cmd := c.command("keys create", "--name NAME --tenant TENANT [--models a,b] [--priority CLASS] [--expires-in 24h | --expires-at RFC3339] [--id ID] [--pending] "+settingsSynopsis)
	var spec admin.KeySpec
	var models, expiresAt string
	cmd.fs.StringVar(&spec.Name, "name", "", "the key's `NAME`, for people (required)")
	cmd.fs.StringVar(&spec.Tenant, "tenant", "", "the `TENANT` usage belongs to (required)")
	cmd.fs.StringVar(&models, "models", "", "comma-separated `ALIASES` the key may use (default: all)")
	cmd.fs.StringVar(&spec.Priority, "priority", "", "default priority `CLASS` (default: standard)")
	cmd.fs.StringVar(&spec.ExpiresIn, "expires-in", "", "expire after `DURATION`, e.g. 24h")
	cmd.fs.StringVar(&expiresAt, "expires-at", "", "expire at `TIME` (RFC 3339)")
	cmd.fs.StringVar(&spec.ID, "id", "", "stable `ID` (default: generated)")
	cmd.fs.BoolVar(&spec.Pending, "pending", false, "create the key pending; 'keys enable' activates it")
	sf := newSettingsFlags(cmd.fs)
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	var k sluice.Key
	change, err := sf.change(cmd)
	if err == nil {
		err = change.Apply(&k)
	}
	if err != nil {
		return err
	}
	spec.KeySettings = k.KeySettings
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
	spec.Models = admin.SplitList(models)
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

// keysList runs "sluice keys list": every key (with --selector, those
// whose labels match), or with --limit or --after one page of them, and
// where the next page starts.
func (c *cli) keysList(args []string) error {
	cmd := c.command("keys list", "[--selector team=web,env!=prod] [--limit N] [--after ID]")
	selector := cmd.fs.String("selector", "", "only the keys whose labels match the label `SELECTOR`")
	limit := cmd.fs.Int("limit", 0, "list a page of at most `N` keys (at most 1000) rather than every key")
	after := cmd.fs.String("after", "", "start the page after the key `ID` (the last of the previous page)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	var (
		keys  []admin.KeyRecord
		total int
		next  string
		paged = *limit > 0 || *after != ""
	)
	switch {
	case paged:
		keys, total, next, err = cl.KeysPage(c.ctx, *selector, *after, cmp.Or(*limit, 100))
	case *selector != "":
		keys, err = cl.SelectKeys(c.ctx, *selector)
	default:
		keys, err = cl.ListKeys(c.ctx)
	}
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(keys)
	}
	t := newTable(c.stdout)
	t.row("ID", "NAME", "TENANT", "STATUS", "PRIORITY", "MODELS", "EXPIRES", "PREFIX", "SOURCE")
	for _, k := range keys {
		t.row(k.ID, k.Name, k.Tenant, string(k.Status), k.Priority, list(k.Models, "*"), expires(k.ExpiresAt), k.Prefix, k.Source)
	}
	if err := t.flush(); err != nil || !paged {
		return err
	}
	fmt.Fprintf(c.stdout, "\n%d keys in all", total)
	if next != "" {
		fmt.Fprintf(c.stdout, "; next page: --after %s", next)
	}
	fmt.Fprintln(c.stdout)
	return nil
}

// keyAction runs "keys show|disable|enable|revoke ID".
func (c *cli) keyAction(args []string, action string) error {
	cmd := c.command("keys "+action, "ID")
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return err
	}
	var k *admin.KeyRecord
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
	var e admin.Expiry
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
	models := admin.SplitList(strings.Join(pos[1:], ","))
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

func (c *cli) keysUpdate(args []string) error {
	cmd := c.command("keys update", "ID [--name NAME] [--models a,b | --models ''] [--priority CLASS] "+settingsSynopsis)
	var name, models, priority string
	cmd.fs.StringVar(&name, "name", "", "the key's new `NAME`")
	cmd.fs.StringVar(&models, "models", "", "comma-separated `ALIASES` the key may use ('' = all)")
	cmd.fs.StringVar(&priority, "priority", "", "default priority `CLASS`")
	sf := newSettingsFlags(cmd.fs)
	pos, err := cmd.parse(args, 1, 1)
	if err != nil {
		return err
	}
	change, err := sf.change(cmd)
	if err != nil {
		return err
	}
	cmd.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			change.Name = &name
		case "models":
			m := admin.SplitList(models)
			if m == nil {
				m = []string{} // the flag given empty: every alias
			}
			change.Models = &m
		case "priority":
			change.Priority = &priority
		}
	})
	if change == (admin.KeyChange{}) {
		return cmd.usage("nothing to change: name at least one field")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	k, err := cl.UpdateKey(c.ctx, pos[0], change)
	if err != nil {
		return err
	}
	return c.printKey(k)
}

// settingsSynopsis lists the flags of settingsFlags.
const settingsSynopsis = "[--labels k=v,…] [--policy MODE] [--accounts a,b] [--pool ID] [--fallback POOL|any] [--wait DURATION] " +
	"[--limits rpm=N,tpm=N,max_inflight=N,daily_tokens=N] [--user-limits …] [--task T] [--tasks a,b] [--paths chat,…] [--service-tiers a,b] [--on-limit wait|refuse] [--assert user,profile] [--trace-content true|false]"

// settingsFlags are the flags of what a key carries besides its name,
// tenant and life cycle, for keys create and keys update. Each is a string
// read only when given, so update changes exactly the fields named.
type settingsFlags struct {
	fs     *flag.FlagSet
	values map[string]*string
}

func newSettingsFlags(fs *flag.FlagSet) *settingsFlags {
	sf := &settingsFlags{fs: fs, values: map[string]*string{}}
	for _, f := range [...][2]string{
		{"labels", "the key's `LABELS`, name=value,… ('' = none)"},
		{"policy", "route policy `MODE`: default, strict, preferred or pool"},
		{"accounts", "the `ACCOUNTS` of a strict or preferred policy, comma-separated"},
		{"pool", "the `POOL` of a pool policy"},
		{"fallback", "the fallback `POOL` (or any) of a preferred policy"},
		{"wait", "how long a preferred policy waits for its accounts (`DURATION`)"},
		{"limits", "the key's `LIMITS`: rpm=N,tpm=N,max_inflight=N,daily_tokens=N ('' = none)"},
		{"user-limits", "each end user's `LIMITS`, as --limits"},
		{"task", "default task `TYPE`"},
		{"tasks", "other task `TYPES` the key may declare, comma-separated"},
		{"paths", "API `PATHS` the key may call: chat, embeddings, videos, fal ('' = all)"},
		{"service-tiers", "service_tier `VALUES` a request may name ('' = any)"},
		{"on-limit", "at the key's own max_inflight: wait or refuse (`ACTION`)"},
		{"assert", "what the key may `ASSERT`: user (its end user selects the user's entitlement), profile (X-Sluice-Profile) ('' = neither)"},
		{"trace-content", "whether traces record the key's prompts and completions: true or false (`BOOL`)"},
	} {
		sf.values[f[0]] = fs.String(f[0], "", f[1])
	}
	return sf
}

// change is the KeyChange of the settings flags given. --policy and the
// flags of a policy replace the whole policy: a policy is one choice.
func (sf *settingsFlags) change(cmd *command) (admin.KeyChange, error) {
	var c admin.KeyChange
	var err error
	var p *admin.KeyPolicy
	policy := func() *admin.KeyPolicy {
		if p == nil {
			p = &admin.KeyPolicy{}
		}
		return p
	}
	sf.fs.Visit(func(f *flag.Flag) {
		v, ok := sf.values[f.Name]
		if !ok || err != nil {
			return
		}
		switch val := *v; f.Name {
		case "labels":
			var labels map[string]string
			labels, err = pairs(val, func(s string) (string, error) { return s, nil })
			c.Labels = &labels
		case "policy":
			policy().Mode = sluice.PolicyMode(val)
		case "accounts":
			policy().Accounts = admin.SplitList(val)
		case "pool":
			policy().Pool = val
		case "fallback":
			policy().Fallback = val
		case "wait":
			if err = policy().Wait.UnmarshalText([]byte(val)); err != nil {
				err = fmt.Errorf("--wait: %w", err)
			}
		case "limits", "user-limits":
			var l admin.KeyLimits
			l, err = limitsFlag(val)
			if f.Name == "limits" {
				c.Limits = &l
			} else {
				c.UserLimits = &l
			}
		case "task":
			c.Task = &val
		case "tasks":
			c.Tasks = ptr(admin.SplitList(val))
		case "paths":
			c.Paths = ptr(admin.SplitList(val))
		case "service-tiers":
			c.ServiceTiers = ptr(admin.SplitList(val))
		case "on-limit":
			c.OnLimit = &val
		case "assert":
			c.Assert = ptr(admin.SplitList(val))
		case "trace-content":
			var on bool
			on, err = strconv.ParseBool(val)
			c.TraceContent = &on
		}
		if err != nil {
			err = cmd.usage("--%s: %v", f.Name, err)
		}
	})
	c.Policy = p
	return c, err
}

func ptr[T any](v T) *T { return &v }

// pairs parses "a=1,b=2" into a map, each value read by parse.
func pairs[V any](s string, parse func(string) (V, error)) (map[string]V, error) {
	out := map[string]V{}
	for _, f := range admin.SplitList(s) {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=value", f)
		}
		v, err := parse(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[strings.TrimSpace(name)] = v
	}
	return out, nil
}

// limitsFlag parses "rpm=60,max_inflight=2".
func limitsFlag(s string) (admin.KeyLimits, error) {
	m, err := pairs(s, strconv.Atoi)
	if err != nil {
		return admin.KeyLimits{}, err
	}
	var l admin.KeyLimits
	for name, n := range m {
		switch name {
		case "rpm":
			l.RPM = n
		case "tpm":
			l.TPM = n
		case "max_inflight":
			l.MaxInflight = n
		case "daily_tokens":
			l.DailyTokens = n
		default:
			return admin.KeyLimits{}, fmt.Errorf("unknown limit %q (want rpm, tpm, max_inflight, daily_tokens)", name)
		}
	}
	return l, nil
}

// printIssued prints a created or rotated key with its plaintext, once.
func (c *cli) printIssued(issued *admin.IssuedKey, what string) error {
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
func (c *cli) printKey(k *admin.KeyRecord) error {
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
	t.row("Source:", k.Source)
	t.row("Labels:", labelList(k.Labels))
	t.row("Policy:", policyText(k.Policy))
	t.row("Limits:", limitsText(k.Limits))
	t.row("User limits:", limitsText(k.UserLimits))
	t.row("Task:", cmp.Or(k.Task, "-"))
	t.row("Other tasks:", list(k.Tasks, "-"))
	t.row("Paths:", list(k.Paths, "* (all)"))
	t.row("Service tiers:", list(k.ServiceTiers, "* (any)"))
	t.row("On limit:", k.OnLimit)
	t.row("Asserts:", list(k.Assert, "-"))
	t.row("Trace content:", strconv.FormatBool(k.TraceContent))
	t.row("Prefix:", k.Prefix)
	t.row("Created:", when(k.CreatedAt))
	t.row("Updated:", when(k.UpdatedAt))
	return t.flush()
}

// labelList shows labels as name=value, sorted.
func labelList(labels map[string]string) string {
	out := make([]string, 0, len(labels))
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, name+"="+labels[name])
	}
	return list(out, "-")
}

// policyText shows a route policy in one line.
func policyText(p admin.KeyPolicy) string {
	out := string(cmp.Or(p.Mode, sluice.PolicyDefault))
	if len(p.Accounts) > 0 {
		out += " accounts=" + strings.Join(p.Accounts, ",")
	}
	var wait string
	if p.Wait != 0 {
		wait = p.Wait.D().String()
	}
	for _, f := range [...][2]string{{"pool", p.Pool}, {"fallback", p.Fallback}, {"wait", wait}} {
		if f[1] != "" {
			out += " " + f[0] + "=" + f[1]
		}
	}
	return out
}

// limitsText shows limits as name=value, "-" when none.
func limitsText(l admin.KeyLimits) string {
	var out []string
	for _, f := range [...]struct {
		name string
		n    int
	}{{"rpm", l.RPM}, {"tpm", l.TPM}, {"max_inflight", l.MaxInflight}, {"daily_tokens", l.DailyTokens}} {
		if f.n != 0 {
			out = append(out, fmt.Sprintf("%s=%d", f.name, f.n))
		}
	}
	return list(out, "-")
}

func expires(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return when(t)
}

// table aligns rows into columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }
