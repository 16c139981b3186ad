package settle

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
)

// Outbox is a second place records go after the store: an event stream.
// Publish returns nil only once every event of every record in recs is
// acknowledged there. A record is published again after a failure, a
// replay or a restart, so an Outbox must make a repeat harmless (each event
// carries a stable ID the stream deduplicates by).
//
// With an Outbox, a spool segment is deleted only once the store has its
// records and the Outbox has acknowledged them: a stream that is down keeps
// them on disk, within the spool's bound, until it is back.
type Outbox interface {
	Publish(ctx context.Context, recs []sluice.UsageRecord) error
}

// Option configures a Recorder at construction.
type Option func(*Recorder)

// WithOutbox publishes every stored record to o before its spool segment
// may go. It is an option of NewRecorder, not a setter, because records a
// dead process left in the spool are replayed from the start: none may be
// deleted before the outbox has them.
func WithOutbox(o Outbox) Option { return func(r *Recorder) { r.outbox = o } }

// publishTimeout bounds one Publish call; a stream that does not answer
// within it is retried at the next tick.
const publishTimeout = 5 * time.Second

// publish hands the records the store has (p.stored) to the outbox, a
// batch at a time, and counts each acknowledged batch as done in the
// spool. It reports whether none is left. Without an outbox p.stored is
// always empty.
func (r *Recorder) publish(p *pending) bool {
	if len(p.stored) > 0 && time.Now().Before(r.retryPublish) {
		return false // the stream refused a moment ago: wait for the next tick
	}
	done := 0
	for done < len(p.stored) {
		n := min(r.batch, len(p.stored)-done)
		if r.publishBatch(p.stored[done:done+n]) != nil {
			break
		}
		r.spool.stored(p.storedSegs[done : done+n])
		done += n
	}
	if done > 0 {
		clear(p.stored[:done]) // drop references to the published records' strings
		p.stored = append(p.stored[:0], p.stored[done:]...)
		p.storedSegs = append(p.storedSegs[:0], p.storedSegs[done:]...)
	}
	r.unpublished.Store(int64(len(p.stored)))
	return len(p.stored) == 0
}

// publishAll publishes recs a batch at a time; nil without an outbox.
func (r *Recorder) publishAll(recs []sluice.UsageRecord) error {
	if r.outbox == nil {
		return nil
	}
	for len(recs) > 0 {
		n := min(r.batch, len(recs))
		if err := r.publishBatch(recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// publishRetry is how long the writer waits after the stream refused a
// batch before it tries again, however often batches are stored meanwhile.
const publishRetry = time.Second

// publishBatch publishes one batch. The first failure of an outage is
// logged, and its end; the failures between are counted by the outbox.
func (r *Recorder) publishBatch(recs []sluice.UsageRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	err := r.outbox.Publish(ctx, recs)
	switch {
	case err != nil:
		r.retryPublish = time.Now().Add(publishRetry)
		if !r.publishFailing {
			r.publishFailing = true
			r.log.LogAttrs(ctx, slog.LevelWarn, "usage events not published: event stream unavailable; their records stay in the spool until it is back",
				slog.Int("records", len(recs)), slog.Any("err", err))
		}
	case r.publishFailing:
		r.publishFailing = false
		r.log.LogAttrs(ctx, slog.LevelInfo, "usage events published again")
	}
	return err
}

// Unpublished counts the records the store has and the outbox has not
// acknowledged yet, held in memory; those on disk only are in SpoolBytes.
// 0 without an outbox.
func (r *Recorder) Unpublished() int64 { return r.unpublished.Load() }
