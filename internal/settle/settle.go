// Package settle finishes a request after its answer: it writes the usage
// record (with every execution) through a batching writer so the request
// path never waits on the database, and counts what could not be written.
// Later issues add claim release and ledger entries here. It depends on
// package sluice and the ledger.Usage interface only.
package settle

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
)

// Recorder batches usage records into a ledger.Usage store. Record is safe
// for concurrent use; Close flushes what is queued and stops the writer.
type Recorder struct {
	store   ledger.Usage
	log     *slog.Logger
	queue   chan sluice.UsageRecord
	batch   int           // records per write
	every   time.Duration // longest a record waits before it is written
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the writer has flushed and stopped
	closing sync.Once
	dropped atomic.Int64
	written atomic.Int64
}

// queueSize absorbs a burst of about a second at a few thousand requests per
// second while the database is slow; past it, Record waits (bounded) rather
// than losing the record.
const queueSize = 4096

// NewRecorder starts a writer that flushes every interval or every batch records.
func NewRecorder(store ledger.Usage, log *slog.Logger, batch int, interval time.Duration) *Recorder {
	r := &Recorder{store: store, log: log, queue: make(chan sluice.UsageRecord, queueSize), batch: batch, every: interval, stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// fullQueueWait bounds how long Record waits for room in a full queue.
const fullQueueWait = 2 * time.Second

// Record queues a usage record. It blocks only when the queue is full, and
// gives up (counting the record as dropped) when ctx ends or fullQueueWait
// passes first. The bound is Record's own, so that callers need no timeout
// context of their own on every request.
func (r *Recorder) Record(ctx context.Context, rec sluice.UsageRecord) {
	select {
	case r.queue <- rec:
		return
	default:
	}
	full := time.NewTimer(fullQueueWait)
	defer full.Stop()
	select {
	case r.queue <- rec:
		return
	case <-full.C:
	case <-ctx.Done():
	}
	r.dropped.Add(1)
	r.log.LogAttrs(ctx, slog.LevelError, "usage record dropped: writer queue full", slog.String("request_id", rec.RequestID))
}

// Dropped counts records that could not be queued or written.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Written counts records the store accepted.
func (r *Recorder) Written() int64 { return r.written.Load() }

// Close flushes the queue and stops the writer. Record must not be called after Close.
func (r *Recorder) Close() {
	r.closing.Do(func() { close(r.stop) })
	<-r.done
}

func (r *Recorder) run() {
	defer close(r.done)
	// The tick writes partial batches and retries a refused write; it is at
	// most a second so an outage is retried promptly whatever the interval.
	t := time.NewTicker(min(r.every, time.Second))
	defer t.Stop()
	var pending []sluice.UsageRecord
	queue := r.queue
	for {
		select {
		case rec := <-queue:
			if pending = append(pending, rec); len(pending) >= r.batch {
				pending = r.write(pending)
			}
		case <-t.C:
			pending = r.write(pending)
		case <-r.stop:
			for {
				select {
				case rec := <-r.queue:
					pending = append(pending, rec)
					continue
				default:
				}
				break
			}
			r.drain(pending)
			return
		}
		// While the store is down, records wait here; past a bound the
		// writer stops reading, the queue fills, and Record pushes back on
		// callers instead of memory growing without limit.
		queue = r.queue
		if len(pending) >= maxPending {
			queue = nil
		}
	}
}

// maxPending bounds the records held while the store refuses writes.
const maxPending = 4 * queueSize

// write stores pending and returns what is left: nothing on success, all of
// it on failure (records are idempotent by request ID, so writing them again
// later is safe).
func (r *Recorder) write(pending []sluice.UsageRecord) []sluice.UsageRecord {
	if len(pending) == 0 {
		return pending
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.store.RecordUsage(ctx, pending); err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "usage records not written yet: store unavailable",
			slog.Int("records", len(pending)), slog.Any("err", err))
		return pending
	}
	r.written.Add(int64(len(pending)))
	return pending[:0]
}

// drain writes what is left at Close, trying for a bounded time.
func (r *Recorder) drain(pending []sluice.UsageRecord) {
	deadline := time.Now().Add(drainTimeout)
	for len(pending) > 0 && time.Now().Before(deadline) {
		if pending = r.write(pending); len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(pending) > 0 {
		r.dropped.Add(int64(len(pending)))
		r.log.LogAttrs(context.Background(), slog.LevelError, "usage records lost at shutdown: store unavailable",
			slog.Int("records", len(pending)))
	}
}

// drainTimeout bounds how long Close waits for an unavailable store.
const drainTimeout = 5 * time.Second
