package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/catalog/sqlcatalog"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// historyEvery is how often the history job runs. Partitions are made
// sqldb.DaysAhead days ahead, so hours of failed runs lose nothing.
const historyEvery = time.Hour

// history keeps the database's history small (docs/history-and-retention.md):
// each run makes the day partitions ahead, and those of rows that went to a
// default partition, rolls up the usage of the days that ended (see
// sqlledger.RollUp), then removes the usage records and audit entries
// older than database.retention, read from the catalog serving at each
// run so a reload applies. Every replica runs it; the stores let one
// replica at a time remove rows, and making a partition that exists does
// nothing.
type history struct {
	db        *sqldb.DB
	usage     *sqlledger.Store
	audit     *sqlcatalog.Store
	retention func() config.Retention
	log       *slog.Logger
}

// startHistory runs the job at once, in the background, then every
// historyEvery until run ends.
func (g *Gateway) startHistory(run context.Context, h *history) {
	g.background(run, func(ctx context.Context) {
		h.run(ctx, time.Now())
		periodic.Run(ctx, historyEvery, func(ctx context.Context) { h.run(ctx, time.Now()) })
	})
}

// run is one run of the job at now. Failures are logged; the next run
// goes on where this one stopped.
func (h *history) run(ctx context.Context, now time.Time) {
	if err := h.db.PartitionDays(ctx, now); err != nil && ctx.Err() == nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "day partitions not made: rows of days without one go to the default partition",
			slog.Any("err", err))
	}
	if err := h.usage.RollUp(ctx, now); err != nil && ctx.Err() == nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "daily roll-ups not written: reports read those days from their records", slog.Any("err", err))
	}
	r := h.retention()
	for _, kept := range []struct {
		what   string
		days   config.Days
		retain func(context.Context, time.Time) (int64, error)
	}{{"usage records", r.Usage, h.usage.Retain}, {"audit entries", r.Audit, h.audit.RetainAudit}} {
		if kept.days == 0 {
			continue
		}
		cutoff := retentionCutoff(now, kept.days)
		removed, err := kept.retain(ctx, cutoff)
		if err != nil && ctx.Err() == nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "history not removed: "+kept.what, slog.Time("before", cutoff), slog.Any("err", err))
		}
		if removed > 0 {
			h.log.LogAttrs(ctx, slog.LevelInfo, "history removed: "+kept.what, slog.Time("before", cutoff), slog.Int64("count", removed))
		}
	}
}

// retentionCutoff is the start of the oldest UTC day kept: days kept
// whole days before now's, today's part besides.
func retentionCutoff(now time.Time, days config.Days) time.Time {
	return ledger.Day(now).AddDate(0, 0, -int(days))
}
