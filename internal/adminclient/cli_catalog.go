package adminclient

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/admin"
)

// catalogCommand runs "sluice catalog history|show|diff|rollback".
func (c *cli) catalogCommand(args []string) error {
	if len(args) == 0 {
		return usageError{msg: "missing catalog command (history, show, diff, rollback)"}
	}
	switch args[0] {
	case "history":
		return c.catalogHistory(args[1:])
	case "show":
		return c.catalogShow(args[1:])
	case "diff":
		return c.catalogDiff(args[1:])
	case "rollback":
		return c.catalogRollback(args[1:])
	}
	return usageError{msg: fmt.Sprintf("unknown catalog command %q (want history, show, diff or rollback)", args[0])}
}

// catalogHistory runs "sluice catalog history [--limit N]".
func (c *cli) catalogHistory(args []string) error {
	cmd := c.command("catalog history", "[--limit N]")
	limit := cmd.fs.Int("limit", 0, "at most `N` versions, newest first (default 100)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	vs, err := cl.CatalogVersions(c.ctx, *limit)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(vs)
	}
	t := newTable(c.stdout)
	t.row("VERSION", "TIME", "BY", "BYTES", "LINES", "NOTE")
	for _, v := range vs {
		note := ""
		if v.RollbackOf > 0 {
			note = fmt.Sprintf("rollback to %d", v.RollbackOf)
		}
		t.row(strconv.FormatInt(v.Version, 10), when(v.At), cmp.Or(v.By, "-"), strconv.Itoa(v.Bytes),
			fmt.Sprintf("+%d -%d", v.LinesAdded, v.LinesRemoved), note)
	}
	return t.flush()
}

// catalogShow runs "sluice catalog show [VERSION]": without a version,
// the document serving now (GET /admin/catalog).
func (c *cli) catalogShow(args []string) error {
	cmd := c.command("catalog show", "[VERSION]")
	pos, err := cmd.parse(args, 0, 1)
	if err != nil {
		return err
	}
	var doc []byte
	if len(pos) == 0 {
		cl, err := cmd.client()
		if err != nil {
			return err
		}
		if doc, _, err = cl.Catalog(c.ctx); err != nil {
			return err
		}
	} else {
		version, cl, err := cmd.version(pos)
		if err != nil {
			return err
		}
		if doc, err = cl.CatalogVersionDoc(c.ctx, version); err != nil {
			return err
		}
	}
	_, err = c.stdout.Write(doc)
	return err
}

// catalogDiff runs "sluice catalog diff A B".
func (c *cli) catalogDiff(args []string) error {
	cmd := c.command("catalog diff", "FROM TO")
	pos, err := cmd.parse(args, 2, 2)
	if err != nil {
		return err
	}
	var v [2]int64
	for i, p := range pos {
		if v[i], err = strconv.ParseInt(p, 10, 64); err != nil || v[i] < 0 || i == 1 && v[i] == 0 {
			return cmd.usage("%q is not a catalog version", p)
		}
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	diff, err := cl.CatalogDiff(c.ctx, v[0], v[1])
	if err != nil {
		return err
	}
	if diff == "" {
		fmt.Fprintf(c.stdout, "versions %d and %d are the same\n", v[0], v[1])
		return nil
	}
	_, err = fmt.Fprint(c.stdout, diff)
	return err
}

// catalogRollback runs "sluice catalog rollback VERSION".
func (c *cli) catalogRollback(args []string) error {
	cmd := c.command("catalog rollback", "VERSION")
	version, cl, err := cmd.version(args)
	if err != nil {
		return err
	}
	st, err := cl.RollbackCatalog(c.ctx, version)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	fmt.Fprintf(c.stdout, "stored version %d with the document of version %d; %d aliases serving here (every replica follows)\n",
		st.StoredVersion, version, len(st.Aliases))
	return nil
}

// version parses a command that takes one stored catalog version, and
// returns it with a client for the admin API.
func (cmd *command) version(args []string) (int64, *Client, error) {
	id, cl, err := cmd.oneID(args)
	if err != nil {
		return 0, nil, err
	}
	v, err := strconv.ParseInt(id, 10, 64)
	if err != nil || v < 1 {
		return 0, nil, cmd.usage("%q is not a catalog version (a number from 1)", id)
	}
	return v, cl, nil
}

// printReplicas adds the replicas of a status to "sluice status".
func (c *cli) printReplicas(st *admin.Status) error {
	if len(st.Replicas) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nReplicas:")
	t := newTable(c.stdout)
	t.row("  ID", "SOURCE", "VERSION", "SINCE", "SEEN", "LAST ERROR")
	for _, r := range st.Replicas {
		id := "  " + r.ID
		if r.ID == st.Replica {
			id = "* " + r.ID
		}
		version := "-"
		if r.Version > 0 {
			version = strconv.FormatInt(r.Version, 10)
		}
		lastError, _, _ := strings.Cut(r.LastError, "\n") // the first problem; the replica's own status has them all
		t.row(id, r.Source, version, when(r.Since), when(r.SeenAt), cmp.Or(lastError, "-"))
	}
	return t.flush()
}
