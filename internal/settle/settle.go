// Package settle finishes a request after its answer: it writes the usage
// record (with every execution) through a batching writer so the request
// path never waits on the database, keeping each record in a local spool
// until the database has it (and, with an Outbox, until an event stream
// has its events), and counts what could not be kept. It depends on package
// sluice and the ledger.Usage interface only; the event stream is behind
// the Outbox interface.
package settle

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Recorder batches usage records into a ledger.Usage store. Record is safe
// for concurrent use; Close flushes what is queued and stops the writer.
//
// With a spool, a record is on local disk before Record returns and stays
// there until the store has it: neither the process dying (SIGKILL, a
// panic, the OOM killer), nor a full queue, nor a database outage loses
// it. Without one (a database in memory, which a dead process loses
// anyway), records wait in memory only.
type Recorder struct {
	store   ledger.Usage
	log     *slog.Logger
	spool   *spool // nil: no spool
	queue   chan queued
	batch   int           // records per write
	every   time.Duration // longest a record waits before it is written
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the writer has flushed and stopped
	closing sync.Once
	dropped atomic.Int64
	guard   atomic.Pointer[Guard]
	// setAsideCount counts the records the store refused (SetAside).
	setAsideCount atomic.Int64
	// held is how many records the writer holds, read from the queue and
	// not yet stored (Pending).
	held atomic.Int64
	// outbox, if set, publishes every stored record before its segment
	// may go (WithOutbox); unpublished counts those waiting for it.
	outbox      Outbox
	unpublished atomic.Int64
	// replayStored is the spilled segment whose records the store took
	// while the outbox refused them: its replay is not written again.
	replayStored *segment
	// publishFailing is set while the outbox refuses, and retryPublish is
	// when to try it again. The writer's alone.
	publishFailing bool
	retryPublish   time.Time
}

// Guard wraps every write of records to the store: write stores them, and
// ids are the request IDs of those that carry a charge. The balance view
// uses it to learn which charges the store has (billing.View.Write).
type Guard func(ids []string, write func() error) error

// GuardWrites makes g wrap every later write, replays included.
func (r *Recorder) GuardWrites(g Guard) { r.guard.Store(&g) }

// queued is a record on its way to the store, and the spool segment that
// holds it (nil if it is not on disk).
type queued struct {
	rec sluice.UsageRecord
	seg *segment
}

// queueSize absorbs a burst of about a second at a few thousand requests per
// second while the database is slow; past it, a spooled record is left for
// the writer to replay from disk, and a record that is not waits (bounded).
const queueSize = 4096

// NewRecorder starts a writer that flushes every interval or every batch
// records. spoolDir is where records are kept until the store has them
// ("" for none); records left there by a process that died are replayed
// into the store in the background. The spool is the store's own: two
// stores must not share one spool directory.
func NewRecorder(store ledger.Usage, log *slog.Logger, spoolDir string, batch int, interval time.Duration, opts ...Option) (*Recorder, error) {
	r := &Recorder{store: store, log: log, queue: make(chan queued, queueSize), batch: batch, every: interval, stop: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	if spoolDir != "" {
		var err error
		if r.spool, err = openSpool(spoolDir, log); err != nil {
			return nil, err
		}
	}
	go r.run()
	return r, nil
}

// fullQueueWait bounds how long Record waits for room in a full queue.
const fullQueueWait = 2 * time.Second

// Record keeps a usage record: once it returns, the record is in the spool
// (when there is one and it has room) and on its way to the store. It does
// not block on a spooled record. A record that is not spooled waits for
// room in a full queue, and is given up (counted as dropped) when ctx ends
// or fullQueueWait passes first. The bound is Record's own, so that callers
// need no timeout context of their own on every request.
func (r *Recorder) Record(ctx context.Context, rec sluice.UsageRecord) {
	q := queued{rec: rec, seg: r.spool.append(&rec)}
	select {
	case r.queue <- q:
		return
	default:
	}
	if q.seg != nil {
		// On disk only now: the writer replays its segment.
		r.spool.spill(q.seg)
		return
	}
	full := time.NewTimer(fullQueueWait)
	defer full.Stop()
	select {
	case r.queue <- q:
		return
	case <-full.C:
	case <-ctx.Done():
	}
	r.dropped.Add(1)
	r.log.LogAttrs(ctx, slog.LevelError, "usage record dropped: writer queue full", slog.String("request_id", rec.RequestID))
}

// Dropped counts records that were lost: neither spooled nor written.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close flushes the queue and the spool and stops the writer. What the
// store does not take within drainTimeout stays in the spool for the next
// start. Record must not be called after Close.
func (r *Recorder) Close() {
	r.closing.Do(func() { close(r.stop) })
	<-r.done
}

// pending are the records the writer holds, with their segments: recs
// on their way to the store, then (with an outbox) stored on their way to
// the outbox.
type pending struct {
	recs       []sluice.UsageRecord
	segs       []*segment
	stored     []sluice.UsageRecord
	storedSegs []*segment
}

// len counts the records held, stored or not.
func (p *pending) len() int { return len(p.recs) + len(p.stored) }

func (p *pending) add(q queued) {
	p.recs = append(p.recs, q.rec)
	p.segs = append(p.segs, q.seg)
}

func (r *Recorder) run() {
	defer close(r.done)
	// The tick writes partial batches, retries a refused write and replays
	// a spilled segment; it is at most a second so an outage is retried
	// promptly whatever the interval.
	t := time.NewTicker(min(r.every, time.Second))
	defer t.Stop()
	var p pending
	queue := r.queue
	for {
		select {
		case q := <-queue:
			if p.add(q); len(p.recs) >= r.batch {
				r.write(&p)
			}
		case <-t.C:
			if r.write(&p) {
				r.replay()
			}
		case <-r.stop:
			r.finish(&p)
			return
		}
		// While the store is down, records wait here; past a bound the
		// writer stops reading, the queue fills, and Record leaves spooled
		// records on disk (and pushes back on callers with unspooled ones)
		// instead of memory growing without limit.
		queue = r.queue
		if p.len() >= maxPending {
			queue = nil
		}
		r.held.Store(int64(len(p.recs)))
	}
}

// Pending counts the records waiting in memory for the store: queued, or
// held by the writer until the store takes them. Those the store has and
// an outbox does not are Unpublished. Records on disk only (a
// full queue's) are in SpoolBytes instead.
func (r *Recorder) Pending() int64 { return int64(len(r.queue)) + r.held.Load() }

// SpoolBytes is the size of the spool's segment files: records the store
// does not have yet, and at most one segment (segmentBytes) of records it
// has, deleted when that segment is full. 0 without a spool.
func (r *Recorder) SpoolBytes() int64 { return r.spool.size() }

// maxPending bounds the records held while the store (or the outbox)
// refuses writes.
const maxPending = 4 * queueSize

// write stores what is pending, then publishes what is stored (with an
// outbox), and reports whether nothing is left. On failure the records stay
// pending (records are idempotent by request ID, and events by their IDs,
// so writing them again later is safe). The two are tried independently:
// a stream that is down does not hold back the database, nor the reverse.
func (r *Recorder) write(p *pending) bool {
	stored := r.storePending(p)
	return r.publish(p) && stored
}

// storePending writes p.recs to the store and reports whether it took
// them. Then they are done, or, with an outbox, wait in p.stored to be
// published.
func (r *Recorder) storePending(p *pending) bool {
	if len(p.recs) == 0 {
		return true
	}
	if err := r.put(p.recs); err != nil {
		return false
	}
	if r.outbox == nil {
		r.spool.stored(p.segs)
	} else {
		p.stored = append(p.stored, p.recs...)
		p.storedSegs = append(p.storedSegs, p.segs...)
	}
	clear(p.recs) // drop references to the stored records' strings
	p.recs, p.segs = p.recs[:0], p.segs[:0]
	return true
}

// put writes one batch to the store, logging a refusal. When the store
// refuses a record itself (ledger.ErrRecordRefused), the batch is written
// in halves, and halves of those, so that the rest is written and each
// record at fault is set aside (setAside): one record the store will never
// take must not hold back every record behind it. An error is the store
// being unavailable: nothing is set aside, and all of recs stays pending.
func (r *Recorder) put(recs []sluice.UsageRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.isolate(ctx, recs)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "usage records not written yet: store unavailable",
			slog.Int("records", len(recs)), slog.Any("err", err))
	}
	return err
}

// isolate writes recs, splitting a batch the store refuses for what it
// holds until each record it refuses is alone, and sets that one aside.
// It stops at the first error of another kind.
func (r *Recorder) isolate(ctx context.Context, recs []sluice.UsageRecord) error {
	err := r.writeBatch(ctx, recs)
	if !errors.Is(err, ledger.ErrRecordRefused) {
		return err
	}
	if len(recs) == 1 {
		r.setAside(ctx, &recs[0], err)
		return nil
	}
	half := len(recs) / 2
	if err := r.isolate(ctx, recs[:half]); err != nil {
		return err
	}
	return r.isolate(ctx, recs[half:])
}

// writeBatch stores recs through the guard, if there is one.
func (r *Recorder) writeBatch(ctx context.Context, recs []sluice.UsageRecord) error {
	write := func() error { return r.store.RecordUsage(ctx, recs) }
	g := r.guard.Load()
	if g == nil {
		return write()
	}
	var ids []string
	for i := range recs {
		if recs[i].Billing != nil {
			ids = append(ids, recs[i].RequestID)
		}
	}
	return (*g)(ids, write)
}

// setAside gives up on a record the store refused, alone: it is counted
// (SetAside), logged as an error, and kept in the spool's set-aside file
// (see spool.setAside) for an operator to replay once the cause is fixed.
func (r *Recorder) setAside(ctx context.Context, rec *sluice.UsageRecord, cause error) {
	r.setAsideCount.Add(1)
	attrs := []slog.Attr{slog.String("request_id", rec.RequestID), slog.Any("err", cause)}
	if path, err := r.spool.setAside(rec); err != nil {
		attrs = append(attrs, slog.String("set_aside_file", path), slog.Any("set_aside_err", err))
	} else if path != "" {
		attrs = append(attrs, slog.String("set_aside_file", path))
	}
	r.log.LogAttrs(ctx, slog.LevelError, "usage record set aside: the store refuses it, the records behind it are written", attrs...)
}

// SetAside counts the records the store refused and the writer set aside.
func (r *Recorder) SetAside() int64 { return r.setAsideCount.Load() }

// replay stores spilled segments from their files, oldest first, deleting
// each once stored, until none is left (it then reports true), the store
// refuses, or records queue up meanwhile: those come first.
func (r *Recorder) replay() (empty bool) {
	for len(r.queue) < r.batch {
		seg := r.spool.nextSpilled()
		if seg == nil {
			return true
		}
		b, err := os.ReadFile(seg.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.LogAttrs(context.Background(), slog.LevelError, "usage spool: segment unreadable", slog.String("segment", seg.path), slog.Any("err", err))
			return false
		}
		recs, unread := decodeFrames(b)
		if unread > 0 {
			// The tail a process killed mid-write leaves: its Record never
			// returned, so no caller saw that answer end.
			r.log.LogAttrs(context.Background(), slog.LevelWarn, "usage spool: torn frame at the end of a segment skipped",
				slog.String("segment", seg.path), slog.Int("bytes", unread))
		}
		if len(recs) > 0 && r.replayStored != seg && r.put(recs) != nil {
			return false
		}
		if err := r.publishAll(recs); err != nil {
			r.replayStored = seg
			return false
		}
		r.replayStored = nil
		r.spool.replayed(seg)
	}
	return false
}

// finish writes what is left at Close, trying for a bounded time, then
// closes the spool with whatever the store did not take still in it.
func (r *Recorder) finish(p *pending) {
	for drained := false; !drained; {
		select {
		case q := <-r.queue:
			p.add(q)
		default:
			drained = true
		}
	}
	deadline := time.Now().Add(drainTimeout)
	for !(r.write(p) && r.replay()) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if lost := notOnDisk(p.segs); lost > 0 {
		r.dropped.Add(int64(lost))
		r.log.LogAttrs(context.Background(), slog.LevelError, "usage records lost at shutdown: store unavailable",
			slog.Int("records", lost))
	}
	if lost := notOnDisk(p.storedSegs); lost > 0 {
		r.log.LogAttrs(context.Background(), slog.LevelError, "usage events lost at shutdown: event stream unavailable (the database has their records)",
			slog.Int("records", lost))
	}
	if left := r.spool.close(); left > 0 {
		r.log.LogAttrs(context.Background(), slog.LevelWarn, "usage records left in the spool for the next start: store unavailable",
			slog.String("spool", r.spool.dir), slog.Int64("bytes", left))
	}
}

// drainTimeout bounds how long Close waits for an unavailable store.
const drainTimeout = 5 * time.Second

// notOnDisk counts the records of segs that no segment holds.
func notOnDisk(segs []*segment) (n int) {
	for _, seg := range segs {
		if seg == nil {
			n++
		}
	}
	return n
}
