package adminclient

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Environment variables the CLI reads.
const (
	EnvAdminURL   = "SLUICE_ADMIN_URL"   // admin API base URL
	EnvAdminToken = "SLUICE_ADMIN_TOKEN" // admin bearer token
)

// DefaultAdminURL is where the CLI looks for the admin API when neither
// --admin nor SLUICE_ADMIN_URL says otherwise.
const DefaultAdminURL = "http://127.0.0.1:8081"

const cliUsage = `admin commands (a running gateway, through its admin API):
  sluice keys create --name NAME --tenant TENANT [--models a,b] [--priority CLASS]
                     [--expires-in 24h | --expires-at RFC3339] [--id ID] [--pending] [SETTINGS]
  sluice keys update ID [--name NAME] [--models a,b] [--priority CLASS] [SETTINGS]
      SETTINGS (as in the catalog; 'sluice keys create -h' describes each):
        --labels k=v,… --policy MODE --accounts a,b --pool ID --fallback POOL|any --wait DURATION
        --limits rpm=N,tpm=N,max_inflight=N,daily_tokens=N --user-limits … --task T --tasks a,b
        --paths chat,embeddings,videos,fal --service-tiers a,b --on-limit wait|refuse
        --assert user,profile --trace-content true|false
  sluice keys list [--selector team=web,env!=prod] [--limit N] [--after ID]
  sluice keys show ID
  sluice keys disable|enable|revoke|rotate ID
  sluice keys expire ID [--in 1h | --at RFC3339 | --never]   (default: now)
  sluice keys models ID (ALIAS[,ALIAS…] | --all)
  sluice keys disable|enable --selector SELECTOR [--dry-run]     (every key whose labels match)
  sluice keys set-policy --selector SELECTOR --policy MODE [--accounts a,b] [--pool ID]
                         [--fallback POOL|any] [--wait DURATION] [--dry-run]
  sluice keys set-limits --selector SELECTOR --limits rpm=N,tpm=N,max_inflight=N,daily_tokens=N [--dry-run]
      SELECTOR: team=web,env!=prod,tier in (a,b),tier notin (c),canary,!canary
  sluice accounts list
  sluice accounts show|disable|enable ID
  sluice accounts suspend ID --reason TEXT   (disabled with the reason; no new claims on any replica)
  sluice accounts resume ID
  sluice credentials list
  sluice credentials show|disable|drain|enable ID
  sluice credentials remove ID [--force]   (--force: only while draining; drops its running work)
  sluice affinity show (--session S --alias A [--tenant T] | --seed HASH)   (the account a session is bound to)
  sluice jobs list [--since RFC3339] [--state S] [--tenant T] [--key ID] [--limit N]   (async jobs, newest first)
  sluice jobs show ID                        (an async job: its binding and timeline)
  sluice usage list [--since RFC3339] [--until RFC3339] [--tenant T] [--key ID] [--alias A] [--model M]
      [--end-user U] [--task-type T] [--code C|ok] [--limit N] [--csv]   (each execution with its expected accounts and fallback)
  sluice usage summary [--bucket minute|hour|day] [the filters of usage list]   (requests, errors, tokens, spend, latency by bucket)
  sluice usage policy [KEY_ID] [--from RFC3339] [--to RFC3339]   (expected vs actual accounts per key)
  sluice usage cache [--from RFC3339] [--to RFC3339] [--by account,alias,day]   (prompt-cache tokens, affinity hit rate)
  sluice audit [--since RFC3339] [--action ACTION] [--target ID] [--limit N]   (admin writes, newest first)
  sluice billing accounts                    (billing accounts with balance and spend)
  sluice billing show ACCOUNT
  sluice billing create ACCOUNT --plan PLAN [--max-inflight N] [--on-limit wait|refuse] [--overdraft AMOUNT]
                        [--allowance AMOUNT --cycle day|month] [--budget-day AMOUNT] [--budget-month AMOUNT]
  sluice billing update ACCOUNT [--plan PLAN] [the flags of create]   (only the flags given change)
  sluice billing bind ACCOUNT (KEY_ID… | --selector SELECTOR [--dry-run])
  sluice billing unbind (KEY_ID… | --selector SELECTOR [--dry-run])
  sluice billing topup ACCOUNT AMOUNT [--reason TEXT] [--idempotency-key KEY]
  sluice billing adjust ACCOUNT AMOUNT --reason TEXT [--idempotency-key KEY]   (AMOUNT may be negative)
  sluice billing refund ACCOUNT REQUEST_ID --reason TEXT   (the request's charge back, once)
  sluice billing statement ACCOUNT [--from RFC3339] [--to RFC3339] [--limit N]
  sluice billing prices [--kind price|cost] [--plan PLAN] [--alias ALIAS] [--model MODEL]
  sluice billing apply-price (--plan PLAN --alias ALIAS | --model MODEL) [--input A] [--output A]
                        [--cache-read A] [--cache-write A] [--reasoning A] [--request A]
                        [--video-second A] [--video-item A] [--effective-from RFC3339]
  sluice billing report [--by account,key,tenant,end_user,alias,model,day] [--from RFC3339] [--to RFC3339]
                        [--account ID] [--key ID] [--tenant ID]   (price, cost and margin)
  sluice billing suspend ACCOUNT --reason TEXT   (its keys get 403 billing_account_suspended)
  sluice billing resume ACCOUNT
      AMOUNT: a decimal string of the catalog's currency, e.g. 25.00
  sluice tenants list                        (tenants with keys, and suspended ones)
  sluice tenants show ID
  sluice tenants suspend ID --reason TEXT    (its keys get 403 tenant_suspended)
  sluice tenants resume ID
  sluice entitlements list [--tenant T] [--user U] [--profile P]   (end users' quota profiles)
  sluice entitlements set TENANT USER PROFILE [--pool POOL] [--from RFC3339] [--until RFC3339] [--dry-run]
  sluice entitlements put -f FILE [--dry-run]   (FILE: a JSON array of {tenant, user, profile, pool, valid_from, valid_until})
  sluice entitlements delete TENANT USER [USER…] [--dry-run]
  sluice apply -f FILE [--if-match VERSION] [--force]
  sluice catalog history [--limit N]         (stored catalog versions: who, when, lines changed)
  sluice catalog show [VERSION]              (its YAML, passwords redacted; no VERSION: the one serving)
  sluice catalog diff FROM TO                (unified diff; FROM 0 = from nothing)
  sluice catalog rollback VERSION            (stores VERSION's document as a new version; every replica follows)
  sluice status                              (the catalog serving, counts, and every replica on the database)

common flags:
  --admin URL        admin API (default $SLUICE_ADMIN_URL or ` + DefaultAdminURL + `)
  --token-file FILE  read the admin token from FILE (default $SLUICE_ADMIN_TOKEN)
  --json             print JSON instead of tables
`

// RunCLI runs one admin subcommand against a running gateway and returns
// the exit code: 0 on success, 1 when the API or anything else failed (the
// message goes to stderr), 2 on a usage error. args start at the
// subcommand, e.g. ["keys", "create", "--name", "x"]. env looks up
// environment variables (os.Getenv when nil).
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	if env == nil {
		env = os.Getenv
	}
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, env: env}
	err := c.run(args)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sluice: %s\n", ue.msg)
		if ue.synopsis != "" {
			fmt.Fprintf(stderr, "usage: sluice %s\n", ue.synopsis)
		}
		fmt.Fprintln(stderr, "run 'sluice help' for every command")
		return 2
	default:
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
}

// usageError is a command line the CLI cannot run.
type usageError struct {
	msg      string
	synopsis string // the command's usage line, when known
}

func (e usageError) Error() string { return e.msg }

// cli is one run of RunCLI.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	env            func(string) string

	adminURL  string
	tokenFile string
	json      bool
}

func (c *cli) run(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing command"}
	}
	switch args[0] {
	case "keys":
		return c.keys(args[1:])
	case "accounts":
		return c.accounts(args[1:])
	case "credentials":
		return c.credentials(args[1:])
	case "jobs":
		return c.jobs(args[1:])
	case "usage":
		return c.usageCommand(args[1:])
	case "audit":
		return c.audit(args[1:])
	case "billing":
		return c.billingCommand(args[1:])
	case "tenants":
		return c.tenants(args[1:])
	case "entitlements":
		return c.entitlements(args[1:])
	case "affinity":
		return c.affinity(args[1:])
	case "apply":
		return c.apply(args[1:])
	case "catalog":
		return c.catalogCommand(args[1:])
	case "status":
		return c.status(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, cliUsage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown command %q", args[0])}
}

// command is one subcommand: its flags and its usage line.
type command struct {
	*cli
	fs       *flag.FlagSet
	synopsis string
}

// command returns the flag set of a subcommand, with the common flags.
func (c *cli) command(name, synopsis string) *command {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	// parse reports errors itself, once; -h prints the help to stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	def := c.env(EnvAdminURL)
	if def == "" {
		def = DefaultAdminURL
	}
	fs.StringVar(&c.adminURL, "admin", def, "admin API base `URL`")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the admin token from `FILE` (default $"+EnvAdminToken+")")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	return &command{cli: c, fs: fs, synopsis: strings.TrimSpace(name + " " + synopsis)}
}

// parse reads flags anywhere among the arguments (Go's flag package stops
// at the first positional one) and checks the number of positional ones.
func (cmd *command) parse(args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := cmd.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(cmd.stdout, "usage: sluice %s\n\nflags:\n", cmd.synopsis)
				cmd.fs.SetOutput(cmd.stdout)
				cmd.fs.PrintDefaults()
				return nil, err
			}
			return nil, usageError{msg: err.Error(), synopsis: cmd.synopsis}
		}
		args = cmd.fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	switch {
	case len(pos) < minPos:
		return nil, usageError{msg: "missing argument", synopsis: cmd.synopsis}
	case len(pos) > maxPos:
		return nil, usageError{msg: fmt.Sprintf("unexpected argument %q", pos[maxPos]), synopsis: cmd.synopsis}
	}
	return pos, nil
}

// usage is a usage error of this command.
func (cmd *command) usage(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), synopsis: cmd.synopsis}
}

// client returns a client of the admin API the flags and environment name.
// oneID parses a command that takes exactly one ID, and returns the ID
// with a client for the admin API.
func (cmd *command) oneID(args []string) (string, *Client, error) {
	pos, err := cmd.parse(args, 1, 1)
	if err != nil {
		return "", nil, err
	}
	cl, err := cmd.client()
	if err != nil {
		return "", nil, err
	}
	return pos[0], cl, nil
}

func (cmd *command) client() (*Client, error) {
	u, err := url.Parse(cmd.adminURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cmd.usage("--admin %q is not an http(s) URL", cmd.adminURL)
	}
	token := cmd.env(EnvAdminToken)
	if cmd.tokenFile != "" {
		b, err := os.ReadFile(cmd.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, cmd.usage("no admin token: set %s or pass --token-file", EnvAdminToken)
	}
	return NewClient(cmd.adminURL, token), nil
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// apply runs "sluice apply -f FILE [--if-match N] [--force]".
func (c *cli) apply(args []string) error {
	cmd := c.command("apply", "-f FILE [--if-match VERSION] [--force]")
	file := cmd.fs.String("f", "", "catalog YAML `FILE` to apply")
	ifMatch := cmd.fs.Int64("if-match", 0, "apply only if the serving catalog is still `VERSION` (0 = no check)")
	force := cmd.fs.Bool("force", false, "apply a catalog without models or keys although the serving one has some")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if *file == "" {
		return cmd.usage("-f FILE is required")
	}
	if *ifMatch < 0 {
		return cmd.usage("--if-match must be a catalog version")
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	st, err := cl.ApplyCatalog(c.ctx, doc, *ifMatch, *force)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	fmt.Fprintf(c.stdout, "applied %s: catalog version %d, stored as version %d, %d aliases\n", *file, st.Version, st.StoredVersion, len(st.Aliases))
	return nil
}

// status runs "sluice status".
func (c *cli) status(args []string) error {
	cmd := c.command("status", "")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	st, err := cl.Status(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	t := newTable(c.stdout)
	t.row("Catalog version:", strconv.FormatInt(st.Version, 10))
	t.row("Source:", st.Source)
	if st.StoredVersion > 0 {
		t.row("Stored version:", strconv.FormatInt(st.StoredVersion, 10))
	}
	t.row("Loaded at:", when(st.LoadedAt))
	t.row("Aliases:", list(st.Aliases, "none"))
	if st.Keys != nil {
		t.row("Keys:", counts(st.Keys, keyStatuses))
	}
	if st.Accounts != nil {
		t.row("Accounts:", counts(st.Accounts, accountStatuses))
	}
	if st.Credentials != nil {
		t.row("Credentials:", counts(st.Credentials, credentialStatuses))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if st.LastError != "" {
		fmt.Fprintf(c.stdout, "\nLast reload failed at %s; still serving version %d:\n", when(st.LastErrorAt), st.Version)
		for line := range strings.SplitSeq(st.LastError, "\n") {
			fmt.Fprintf(c.stdout, "  %s\n", line)
		}
	}
	return c.printReplicas(st)
}

// counts lists the counts by status, "2 active, 1 disabled": the statuses in
// order first, then any other in name order.
func counts[S ~string](by map[S]int, order []S) string {
	others := slices.DeleteFunc(slices.Sorted(maps.Keys(by)), func(s S) bool { return slices.Contains(order, s) })
	var out []string
	for _, s := range append(slices.Clone(order), others...) {
		if n := by[s]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, s))
		}
	}
	return list(out, "none")
}

// when formats an instant for people; zero is "-".
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// list joins items, or says none.
func list(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return strings.Join(items, ", ")
}
