package settle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
)

// flakyStore refuses writes while down, as a database that went away, and
// any batch holding a record refused names, as a database refuses a value
// it cannot hold.
type flakyStore struct {
	memledger.Store
	mu      sync.Mutex
	down    bool
	refused map[string]bool // by request ID
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
	for _, r := range recs {
		if f.refused[r.RequestID] {
			return fmt.Errorf("%s: bigint out of range: %w", r.RequestID, ledger.ErrRecordRefused)
		}
	}
	return f.Store.RecordUsage(ctx, recs)
}

// stored counts the distinct records in the store.
func (f *flakyStore) stored(t *testing.T) int {
	recs, err := f.ListUsage(t.Context(), ledger.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newRecorder(t *testing.T, store *flakyStore, spoolDir string, batch int, interval time.Duration) *Recorder {
	t.Helper()
	r, err := NewRecorder(store, discard, spoolDir, batch, interval)
	if err != nil {
		t.Fatalf("NewRecorder = %v", err)
	}
	return r
}

func record(id int) sluice.UsageRecord {
	return sluice.UsageRecord{RequestID: fmt.Sprintf("req-%05d", id), Started: time.Now()}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// Generous: tens of thousands of records replayed under the race
	// detector on a busy machine take seconds; a passing test waits no
	// longer than its condition.
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// writerDirs lists the Recorder directories left under a spool directory.
func writerDirs(t *testing.T, root string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, writerPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestRecordsSurviveAStoreOutage(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := newRecorder(t, store, t.TempDir(), 8, 10*time.Millisecond)
	for i := range 20 {
		r.Record(t.Context(), record(i))
	}
	store.setDown(false)
	eventually(t, "20 records stored", func() bool { return store.stored(t) == 20 })
	r.Close()
	if r.Dropped() != 0 {
		t.Errorf("dropped = %d, want 0", r.Dropped())
	}
}

func TestCloseFlushesAndRemovesTheSpool(t *testing.T) {
	store, root := &flakyStore{}, t.TempDir()
	r := newRecorder(t, store, root, 1000, time.Hour)
	r.Record(t.Context(), record(1))
	r.Close()
	if n := store.stored(t); n != 1 {
		t.Errorf("records after Close = %d, want the queued one flushed", n)
	}
	if dirs := writerDirs(t, root); len(dirs) != 0 {
		t.Errorf("spool directories after a clean Close = %v, want none", dirs)
	}
}

// TestFullQueueAndDownStoreDropNothing fills the writer's memory and queue
// while the store is down: every record is kept in the spool, Record never
// blocks, and all are stored once the store is back.
func TestFullQueueAndDownStoreDropNothing(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := newRecorder(t, store, t.TempDir(), 64, 10*time.Millisecond)
	defer r.Close()
	const n = maxPending + queueSize + 500
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		r.Record(ctx, record(i))
		cancel()
	}
	if r.Dropped() != 0 {
		t.Fatalf("dropped while the store was down = %d, want 0", r.Dropped())
	}
	store.setDown(false)
	eventually(t, fmt.Sprintf("%d records stored", n), func() bool { return store.stored(t) == n })
}

func TestWithoutSpoolRecordGivesUpWhenTheQueueStaysFull(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := newRecorder(t, store, "", 1, time.Hour)
	defer func() { store.setDown(false); r.Close() }()
	// maxPending records wait in the writer, queueSize in the queue; the
	// next Record blocks until its context ends and counts a drop.
	for i := 0; r.Dropped() == 0 && i < maxPending+queueSize+100; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		r.Record(ctx, record(i))
		cancel()
	}
	if r.Dropped() == 0 {
		t.Errorf("Record never gave up on a full queue with a store that stays down")
	}
}

// die leaves s as a killed process would: files and lock released by the
// kernel, nothing flushed or removed.
func die(s *spool) {
	if s.file != nil {
		s.file.Close()
	}
	s.lock.Close()
}

func TestReplaysWhatADeadRecorderLeft(t *testing.T) {
	root := t.TempDir()
	dead, err := openSpool(root, discard)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		rec := record(i)
		if dead.append(&rec) == nil {
			t.Fatalf("append #%d refused", i)
		}
	}
	// Killed in the middle of a write: half a frame at the end.
	torn := record(n)
	frame := appendFrame(nil, &torn)
	if _, err := dead.file.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	die(dead)

	store := &flakyStore{}
	r := newRecorder(t, store, root, 16, 10*time.Millisecond)
	eventually(t, fmt.Sprintf("%d replayed records", n), func() bool { return store.stored(t) == n })
	r.Close()
	if dirs := writerDirs(t, root); len(dirs) != 0 {
		t.Errorf("spool directories after the replay and a clean Close = %v, want none", dirs)
	}
}

// TestRefusedRecordsAreSetAside gives the writer records the store refuses
// for what they hold, queued and replayed from a dead process's spool: the
// rest are all written, and each refused one is set aside, counted and kept
// in the set-aside file, never retried for ever in front of the others.
func TestRefusedRecordsAreSetAside(t *testing.T) {
	root := t.TempDir()
	dead, err := openSpool(root, discard)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 120; i++ {
		rec := record(i)
		dead.append(&rec)
	}
	die(dead)
	store := &flakyStore{refused: map[string]bool{"req-00007": true, "req-00013": true, "req-00014": true, "req-00111": true}}
	r := newRecorder(t, store, root, 16, 10*time.Millisecond)
	for i := range 40 {
		r.Record(t.Context(), record(i))
	}
	eventually(t, "the 56 other records stored", func() bool { return store.stored(t) == 56 })
	r.Close()
	if got := r.SetAside(); got != 4 {
		t.Errorf("SetAside = %d, want the 4 refused records", got)
	}
	b, err := os.ReadFile(filepath.Join(root, setAsideName))
	if err != nil {
		t.Fatal(err)
	}
	kept, unread := decodeFrames(b)
	ids := map[string]bool{}
	for _, rec := range kept {
		ids[rec.RequestID] = true
	}
	if len(kept) != 4 || unread != 0 || !maps.Equal(ids, store.refused) {
		t.Errorf("set-aside file holds %d records %v (%d bytes unread), want the 4 refused ones", len(kept), ids, unread)
	}
	if dirs := writerDirs(t, root); len(dirs) != 0 {
		t.Errorf("spool directories after a clean Close = %v, want none: a set-aside record is done with", dirs)
	}
}

func TestLiveSpoolIsNotAdopted(t *testing.T) {
	root := t.TempDir()
	live, err := openSpool(root, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer die(live)
	rec := record(1)
	live.append(&rec)
	other, err := openSpool(root, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer die(other)
	if len(other.segs) != 0 {
		t.Errorf("a second spool adopted %d segments of a live one, want 0", len(other.segs))
	}
	if _, err := os.Stat(live.dir); err != nil {
		t.Errorf("the live spool's directory: %v", err)
	}
}

// While the store is down, Pending counts the records waiting in memory
// and SpoolBytes the segment files on disk; once it is back, nothing is
// pending.
func TestBacklogWhileTheStoreIsDown(t *testing.T) {
	store, root := &flakyStore{}, t.TempDir()
	store.setDown(true)
	r := newRecorder(t, store, root, 8, 10*time.Millisecond)
	defer r.Close()
	for i := range 20 {
		r.Record(t.Context(), record(i))
	}
	eventually(t, "20 records pending", func() bool { return r.Pending() == 20 })
	segs, err := filepath.Glob(filepath.Join(root, writerPrefix+"*", "*"+segmentExt))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments = %v, %v; want some", segs, err)
	}
	var onDisk int64
	for _, seg := range segs {
		info, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		onDisk += info.Size()
	}
	if got := r.SpoolBytes(); got != onDisk || got == 0 {
		t.Errorf("SpoolBytes = %d, want the %d bytes of the segment files", got, onDisk)
	}
	store.setDown(false)
	eventually(t, "nothing pending", func() bool { return r.Pending() == 0 && store.stored(t) == 20 })
}

// Without a spool, the backlog is in memory only.
func TestBacklogWithoutASpool(t *testing.T) {
	store := &flakyStore{}
	store.setDown(true)
	r := newRecorder(t, store, "", 8, 10*time.Millisecond)
	defer r.Close()
	for i := range 5 {
		r.Record(t.Context(), record(i))
	}
	eventually(t, "5 records pending", func() bool { return r.Pending() == 5 })
	if got := r.SpoolBytes(); got != 0 {
		t.Errorf("SpoolBytes = %d without a spool, want 0", got)
	}
	store.setDown(false)
	eventually(t, "nothing pending", func() bool { return r.Pending() == 0 })
}
