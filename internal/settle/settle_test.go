package settle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
)

// flakyStore refuses writes while down, as a database that went away.
type flakyStore struct {
	memledger.Store
	mu   sync.Mutex
	down bool
}

func (f *flakyStore) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyStore) RecordUsage(ctx context.Context, recs []sluice.UsageRecord) error {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return errors.New("database is unavailable")
	}
	return f.Store.RecordUsage(ctx, recs)
}

func TestRecordsSurviveAStoreOutage(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := NewRecorder(store, slog.New(slog.NewTextHandler(io.Discard, nil)), 8, 10*time.Millisecond)
	for i := range 20 {
		r.Record(t.Context(), sluice.UsageRecord{RequestID: "req-" + string(rune('a'+i)), Started: time.Now()})
	}
	time.Sleep(50 * time.Millisecond) // several failed flushes
	if n := r.Written(); n != 0 {
		t.Fatalf("written while the store was down = %d", n)
	}
	store.setDown(false)
	deadline := time.Now().Add(2 * time.Second)
	for r.Written() < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	recs, _ := store.ListUsage(t.Context(), time.Time{}, 0)
	if len(recs) != 20 || r.Dropped() != 0 {
		t.Errorf("after the store came back: %d records stored, %d dropped; want 20 and 0", len(recs), r.Dropped())
	}
}

func TestCloseFlushes(t *testing.T) {
	store := &flakyStore{}
	r := NewRecorder(store, slog.New(slog.NewTextHandler(io.Discard, nil)), 1000, time.Hour)
	r.Record(t.Context(), sluice.UsageRecord{RequestID: "only", Started: time.Now()})
	r.Close()
	if recs, _ := store.ListUsage(t.Context(), time.Time{}, 0); len(recs) != 1 {
		t.Errorf("records after Close = %d, want the queued one flushed", len(recs))
	}
}

func TestRecordGivesUpWhenTheQueueStaysFull(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := NewRecorder(store, slog.New(slog.NewTextHandler(io.Discard, nil)), 1, time.Hour)
	defer func() { store.setDown(false); r.Close() }()
	// maxPending records wait in the writer, queueSize in the queue; the
	// next Record blocks until its context ends and counts a drop.
	for i := 0; r.Dropped() == 0 && i < maxPending+queueSize+100; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		r.Record(ctx, sluice.UsageRecord{RequestID: "r", Started: time.Now()})
		cancel()
	}
	if r.Dropped() == 0 {
		t.Errorf("Record never gave up on a full queue with a store that stays down")
	}
}
