package adminclient

import (
	"github.com/sluicehq/sluice/internal/admin"

	"context"
	"fmt"
	"net/http"
	"time"
)

// Job returns the async job with id.
func (c *Client) Job(ctx context.Context, id string) (*admin.JobState, error) {
	return fetch[admin.JobState](ctx, c, http.MethodGet, itemPath("jobs", id, ""), nil)
}

// jobs runs "sluice jobs show ID".
func (c *cli) jobs(args []string) error {
	if len(args) == 0 || args[0] != "show" {
		return usageError{msg: "missing or unknown jobs subcommand (show)"}
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

// ran is how long the job has run (or ran): acceptance to its end, or to now.
func ran(j *admin.JobState) time.Duration {
	if j.Ended != nil {
		return j.Ended.Sub(j.Submitted)
	}
	return time.Since(j.Submitted)
}
