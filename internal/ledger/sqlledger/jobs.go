package sqlledger

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

const jobColumns = `request_id, state, submitted_at, running_at, ended_at, seconds`

// insertJobs writes the job part of the new records that have one. Jobs are
// few (one record per video), so each is a plain one-row statement.
func (w *writer) insertJobs(ctx context.Context, recs []sluice.UsageRecord, inserted []bool) error {
	for i := range recs {
		j := recs[i].Job
		if j == nil || !inserted[i] {
			continue
		}
		var running int64
		if !j.Running.IsZero() {
			running = j.Running.UnixMicro()
		}
		if _, err := w.tx.Exec(ctx, `INSERT INTO job_usage (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
			recs[i].RequestID, j.State, j.Submitted.UnixMicro(), running, j.Ended.UnixMicro(), j.Seconds); err != nil {
			return err
		}
	}
	return nil
}

// attachJobs loads the job parts of recs by their IDs, as
// attachExecutions does.
func (s *Store) attachJobs(ctx context.Context, recs []sluice.UsageRecord) error {
	return byChunks(recs, func(chunk []sluice.UsageRecord, ids []any) error {
		return s.attachJobChunk(ctx, chunk, ids)
	})
}

func (s *Store) attachJobChunk(ctx context.Context, recs []sluice.UsageRecord, ids []any) error {
	byID := make(map[string]*sluice.UsageRecord, len(recs))
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
	}
	rows, err := s.db.Query(ctx, `SELECT `+jobColumns+` FROM job_usage WHERE request_id IN `+idList(len(ids)), ids...)
	if err != nil {
		return fmt.Errorf("list job usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			j                         sluice.JobUsage
			id                        string
			submitted, running, ended int64
		)
		if err := rows.Scan(&id, &j.State, &submitted, &running, &ended, &j.Seconds); err != nil {
			return fmt.Errorf("list job usage: %w", err)
		}
		r, ok := byID[id]
		if !ok {
			continue
		}
		j.Submitted, j.Ended = time.UnixMicro(submitted).UTC(), time.UnixMicro(ended).UTC()
		if running != 0 {
			j.Running = time.UnixMicro(running).UTC()
		}
		r.Job = &j
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list job usage: %w", err)
	}
	return nil
}
