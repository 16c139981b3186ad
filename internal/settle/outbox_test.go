package settle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// stream is an event stream that refuses while down and keeps, by request
// ID, how often each record was acknowledged: what a stream that
// deduplicates would hold is its keys.
type stream struct {
	mu    sync.Mutex
	down  bool
	acked map[string]int
}

func (s *stream) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *stream) Publish(ctx context.Context, recs []sluice.UsageRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("nats: no servers available for connection")
	}
	if s.acked == nil {
		s.acked = map[string]int{}
	}
	for _, r := range recs {
		s.acked[r.RequestID]++
	}
	return nil
}

// distinct counts the records acknowledged at least once.
func (s *stream) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// countingStore counts the records each write hands the store.
type countingStore struct {
	flakyStore
	mu      sync.Mutex
	written int
}

func (c *countingStore) RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error {
	c.mu.Lock()
	c.written += len(recs)
	c.mu.Unlock()
	return c.flakyStore.RecordUsage(ctx, recs)
}

func (c *countingStore) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written
}

// TestSegmentStaysUntilTheStreamHasItsRecords: with the stream down, the
// database gets every record, but the spool keeps them all; once the
// stream is back each is published, and Close leaves no spool behind.
func TestSegmentStaysUntilTheStreamHasItsRecords(t *testing.T) {
	store, out, root := &flakyStore{}, &stream{}, t.TempDir()
	out.setDown(true)
	r, err := NewRecorder(store, discard, root, 8, 10*time.Millisecond, WithOutbox(out))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		r.Record(t.Context(), record(i))
	}
	eventually(t, "the records stored", func() bool { return store.stored(t) == n })
	eventually(t, "the records unpublished", func() bool { return r.Unpublished() == n })
	if r.Pending() != 0 {
		t.Errorf("Pending = %d, want 0: the store has every record", r.Pending())
	}
	// Sealing the active segment lets a done segment go: it must not.
	r.spool.mu.Lock()
	r.spool.seal()
	r.spool.mu.Unlock()
	if got := r.SpoolBytes(); got == 0 {
		t.Fatal("spool deleted while the stream has none of its records")
	}
	out.setDown(false)
	eventually(t, "every record published", func() bool { return out.distinct() == n && r.Unpublished() == 0 })
	eventually(t, "the spool emptied", func() bool { return r.SpoolBytes() == 0 })
	r.Close()
	if dirs := writerDirs(t, root); len(dirs) != 0 {
		t.Errorf("spool directories after a clean Close = %v, want none", dirs)
	}
	for id, times := range out.acked {
		if times != 1 {
			t.Errorf("%s acknowledged %d times, want once (nothing was replayed)", id, times)
		}
	}
}

// TestDeadRecorderWithUnpublishedRecords: a process killed while the
// stream was down leaves records the database has; the next one replays
// them to the stream, without writing them to the store again on every
// retry while the stream is still down.
func TestDeadRecorderWithUnpublishedRecords(t *testing.T) {
	root := t.TempDir()
	dead, err := openSpool(root, discard)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		rec := record(i)
		if dead.append(&rec) == nil {
			t.Fatalf("append #%d refused", i)
		}
	}
	die(dead)

	store, out := &countingStore{}, &stream{}
	out.setDown(true)
	r, err := NewRecorder(store, discard, root, 8, 10*time.Millisecond, WithOutbox(out))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replayed records stored", func() bool { return store.stored(t) == n })
	time.Sleep(100 * time.Millisecond) // several ticks with the stream down
	if w := store.writes(); w != n {
		t.Errorf("records written while the stream was down = %d, want %d (once)", w, n)
	}
	if r.SpoolBytes() == 0 {
		t.Fatal("replayed segment deleted while the stream has none of its records")
	}
	out.setDown(false)
	eventually(t, "every record published", func() bool { return out.distinct() == n })
	eventually(t, "the spool emptied", func() bool { return r.SpoolBytes() == 0 })
	r.Close()
	if dirs := writerDirs(t, root); len(dirs) != 0 {
		t.Errorf("spool directories after the replay and a clean Close = %v, want none", dirs)
	}
}

// TestStreamDownDoesNotHoldBackTheStore: records keep reaching the
// database while the stream refuses, and the stream's refusals are the
// only backlog.
func TestStreamDownDoesNotHoldBackTheStore(t *testing.T) {
	store, out := &flakyStore{}, &stream{}
	out.setDown(true)
	r, err := NewRecorder(store, discard, t.TempDir(), 4, 10*time.Millisecond, WithOutbox(out))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { out.setDown(false); r.Close() }()
	for i := range 10 {
		r.Record(t.Context(), record(i))
		want := i + 1
		eventually(t, fmt.Sprintf("%d records stored", want), func() bool { return store.stored(t) == want })
	}
	if out.distinct() != 0 {
		t.Errorf("published = %d while the stream is down", out.distinct())
	}
}
