package adminclient

import (
	"fmt"
	"strconv"
	"time"
)

// audit runs "sluice audit [--since RFC3339] [--action A] [--target ID] [--limit N]".
func (c *cli) audit(args []string) error {
	cmd := c.command("audit", "[--since RFC3339] [--action ACTION] [--target ID] [--limit N]")
	var q AuditQuery
	var since string
	cmd.fs.StringVar(&since, "since", "", "entries at or after `TIME` (RFC 3339)")
	cmd.fs.StringVar(&q.Action, "action", "", "entries of the `ACTION`, e.g. keys.disable")
	cmd.fs.StringVar(&q.Target, "target", "", "entries that name the key, account or credential `ID` (or catalog)")
	cmd.fs.IntVar(&q.Limit, "limit", 0, "at most `N` entries, newest first (default 100)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return cmd.usage("--since %q is not an RFC 3339 time", since)
		}
		q.Since = t
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	entries, err := cl.Audit(c.ctx, q)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(entries)
	}
	t := newTable(c.stdout)
	t.row("TIME", "TOKEN", "FROM", "ACTION", "TARGETS", "STATUS")
	for _, e := range entries {
		status := strconv.Itoa(e.Status)
		if e.Error != "" {
			status += " " + e.Error
		}
		t.row(when(e.At), e.TokenID, e.Remote, e.Action, list(e.Targets, "-"), status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(entries) > 0 {
		fmt.Fprintln(c.stdout, "(--json shows each entry's state before and after)")
	}
	return nil
}
