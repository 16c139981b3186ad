package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Job returns the async job with id.
func (c *Client) Job(ctx context.Context, id string) (*admin.JobState, error) {
	return fetch[admin.JobState](ctx, c, http.MethodGet, itemPath("jobs", id, ""), nil)
}

// Jobs returns the async jobs q selects, newest first.
func (c *Client) Jobs(ctx context.Context, q admin.JobQuery) ([]admin.JobState, error) {
	v := url.Values{}
	setTime(v, "since", q.Since)
	for name, value := range map[string]string{"state": q.State, "tenant": q.Tenant, "key": q.KeyID} {
		if value != "" {
			v.Set(name, value)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return fetchAll[admin.JobState](ctx, c, withQuery("/admin/jobs", v))
}

// jobs runs "sluice jobs list|show".
func (c *cli) jobs(args []string) error {
	if len(args) > 0 && args[0] == "list" {
		return c.jobsList(args[1:])
	}
	if len(args) == 0 || args[0] != "show" {
		return usageError{msg: "missing or unknown jobs subcommand (list, show)"}
	}
	id, cl, err := c.command("jobs show", "ID").oneID(args[1:])
	if err != nil {
		return err
	}
	j, err := cl.Job(c.ctx, id)
	if err != nil {
		return err
	}
	whenPtr := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return when(*t)
	}
	return c.printFields(j, [][2]string{
		{"ID", j.ID}, {"Key", j.KeyID}, {"Protocol", j.Protocol}, {"Alias", j.Alias}, {"State", string(j.State)},
		{"Credential", j.CredentialID}, {"Account", j.AccountID}, {"Endpoint", j.EndpointID},
		{"Upstream ID", j.UpstreamID}, {"Submitted", when(j.Submitted)}, {"Running", whenPtr(j.Running)},
		{"Ended", whenPtr(j.Ended)}, {"Next poll", whenPtr(j.NextPoll)},
		{"Ran", fmt.Sprint(ran(j).Round(time.Millisecond))},
	})
}

// jobsList runs "sluice jobs list": a row per job, newest first.
func (c *cli) jobsList(args []string) error {
	cmd := c.command("jobs list", "[--since RFC3339] [--state S] [--tenant T] [--key ID] [--limit N]")
	var q admin.JobQuery
	timeFlag(cmd, &q.Since, "since", "jobs queued at or after `TIME` (RFC 3339; default: any)")
	cmd.fs.StringVar(&q.State, "state", "", "only jobs in `STATE` (queued, in_progress, completed, failed, cancelled, expired)")
	cmd.fs.StringVar(&q.Tenant, "tenant", "", "only jobs of `TENANT`")
	cmd.fs.StringVar(&q.KeyID, "key", "", "only jobs of the key `ID`")
	cmd.fs.IntVar(&q.Limit, "limit", 0, "at most `N` jobs (default 100, at most 1000)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cl, err := cmd.client()
	if err != nil {
		return err
	}
	jobs, err := cl.Jobs(c.ctx, q)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(jobs)
	}
	t := newTable(c.stdout)
	t.row("ID", "KEY", "TENANT", "ALIAS", "STATE", "ACCOUNT", "QUEUED", "RAN")
	for i := range jobs {
		j := &jobs[i]
		t.row(j.ID, j.KeyID, orDash(j.Tenant), j.Alias, string(j.State), j.AccountID, when(j.Queued), fmt.Sprint(ran(j).Round(time.Millisecond)))
	}
	return t.flush()
}

// ran is how long the job has run (or ran): acceptance to its end, or to now.
func ran(j *admin.JobState) time.Duration {
	if j.Ended != nil {
		return j.Ended.Sub(j.Submitted)
	}
	return time.Since(j.Submitted)
}
