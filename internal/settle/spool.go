package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
)

// A spool keeps every usage record on local disk from the moment Record
// returns until the store has it, so that a process killed by SIGKILL, a
// panic or the OOM killer loses none: the next start replays what is left.
// Records are written with one write(2) and never fsync'd: they survive the
// process, not a crash of the machine or a power loss.
//
// Each Recorder owns a directory under the spool directory, named w-*,
// holding a lock file and numbered segment files. The lock is held while
// the Recorder lives; the kernel releases it when the process dies, however
// it dies. At start a Recorder adopts every other w-* directory whose lock
// it can take (its owner is gone): it moves their segments into its own
// directory and replays them. Records are idempotent by request ID, so a
// record both written from memory and replayed from disk is stored once.
type spool struct {
	dir  string   // this Recorder's own directory
	lock *os.File // held for the Recorder's life
	log  *slog.Logger

	mu      sync.Mutex
	buf     []byte     // the frame being written, reused
	file    *os.File   // the active segment, open for appending; nil until the next append opens one
	segs    []*segment // on disk, oldest first; the active one is last
	next    int        // number of the next segment file
	bytes   int64      // in all of segs
	refused bool       // the last append failed; logged once until one succeeds
}

// segment is one segment file and what became of its records. Guarded by
// the spool's mu.
type segment struct {
	path    string
	bytes   int64
	records int  // appended
	written int  // of those, done from the writer's memory: stored, and published when there is an outbox
	sealed  bool // no more appends: done once its records are stored
	spilled bool // some records are on disk only: the writer replays the file
}

// Disk bounds. segmentBytes keeps a replay's memory small and lets stored
// records be deleted a segment at a time; maxSpoolBytes bounds a long
// database outage (about two million records). At the bound, records are
// held in memory only, as if there were no spool, until the writer catches
// up.
const (
	segmentBytes  = 4 << 20
	maxSpoolBytes = 1 << 30
)

const (
	writerPrefix = "w-"
	lockName     = "lock"
	segmentExt   = ".seg"
)

// openSpool creates this Recorder's directory under root and adopts the
// directories that dead processes left there; their segments come back
// spilled, for the writer to replay.
func openSpool(root string, log *slog.Logger) (*spool, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	// The directory is made whole under a name no one adopts, then renamed:
	// another process never sees it without its lock held.
	tmp, err := os.MkdirTemp(root, ".new-")
	if err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(tmp, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		var held bool
		if held, err = tryLock(lock); err == nil && !held {
			err = errors.New("lock of a new directory is held")
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("usage spool: lock: %w", err)
	}
	dir := filepath.Join(root, writerPrefix+strings.TrimPrefix(filepath.Base(tmp), ".new-"))
	if err := os.Rename(tmp, dir); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	s := &spool{dir: dir, lock: lock, log: log}
	if err := s.adopt(root); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// adopt moves the segments of every abandoned writer directory under root
// into s, sealed and spilled.
func (s *spool) adopt(root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("usage spool: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), writerPrefix) || dir == s.dir {
			continue
		}
		if err := s.adoptDir(dir); err != nil {
			return fmt.Errorf("usage spool: adopt %s: %w", e.Name(), err)
		}
	}
	return nil
}

func (s *spool) adoptDir(dir string) error {
	lock, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return nil // another process adopted it meanwhile
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	if held, err := tryLock(lock); err != nil || !held {
		return err // alive: its owner holds the lock
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil {
		return err
	}
	slices.Sort(names) // zero-padded numbers: oldest first
	for _, name := range names {
		seg := s.newSegment()
		if err := os.Rename(name, seg.path); err != nil {
			return err
		}
		info, err := os.Stat(seg.path)
		if err != nil {
			return err
		}
		seg.bytes, seg.sealed, seg.spilled = info.Size(), true, true
		s.segs = append(s.segs, seg)
		s.bytes += seg.bytes
	}
	return os.RemoveAll(dir)
}

// newSegment names the next segment file. Callers hold mu or own s alone.
func (s *spool) newSegment() *segment {
	s.next++
	return &segment{path: filepath.Join(s.dir, fmt.Sprintf("%08d%s", s.next, segmentExt))}
}

// errSpoolFull refuses a record past maxSpoolBytes.
var errSpoolFull = errors.New("usage spool is full")

// append writes rec's frame to the active segment with one write(2) and
// returns the segment, or nil when rec is not on disk (there is no spool,
// it is full, or the write failed). Safe for concurrent use, also on a nil
// spool (no spool).
func (s *spool) append(rec *sluice.UsageRecord) *segment {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = appendFrame(s.buf[:0], rec)
	seg, err := s.write(s.buf)
	if err != nil {
		if !s.refused {
			s.log.LogAttrs(context.Background(), slog.LevelError, "usage records held in memory only: spool refuses them",
				slog.String("request_id", rec.RequestID), slog.Any("err", err))
		}
		s.refused = true
		return nil
	}
	if s.refused {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "usage spool accepts records again")
		s.refused = false
	}
	return seg
}

// write appends one frame, opening a segment when none is active or the
// active one is full. Callers hold mu.
func (s *spool) write(frame []byte) (*segment, error) {
	if s.bytes+int64(len(frame)) > maxSpoolBytes {
		return nil, errSpoolFull
	}
	if s.file != nil && s.active().bytes+int64(len(frame)) > segmentBytes {
		s.seal()
	}
	if s.file == nil {
		seg := s.newSegment()
		f, err := os.OpenFile(seg.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		s.file = f
		s.segs = append(s.segs, seg)
	}
	seg := s.active()
	n, err := s.file.Write(frame)
	seg.bytes += int64(n)
	s.bytes += int64(n)
	if err != nil {
		// A torn frame ends what a replay reads of this segment: later
		// records go to a new one.
		s.seal()
		return nil, err
	}
	seg.records++
	return seg, nil
}

// active is the segment being appended to. Callers hold mu, with s.file set.
func (s *spool) active() *segment { return s.segs[len(s.segs)-1] }

// seal closes the active segment to appends. Callers hold mu.
func (s *spool) seal() {
	if s.file == nil {
		return
	}
	s.file.Close()
	s.file = nil
	s.active().sealed = true
	s.collect()
}

// spill marks seg as holding records that are on disk only.
func (s *spool) spill(seg *segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg.spilled = true
}

// stored counts records the writer is done with from memory (stored, and
// published when there is an outbox), by their segments (nil for a record
// not on disk), and deletes segments now done.
func (s *spool) stored(segs []*segment) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range segs {
		if seg != nil {
			seg.written++
		}
	}
	s.collect()
}

// collect deletes the sealed segments whose records are all done from
// memory. Callers hold mu.
func (s *spool) collect() {
	s.segs = slices.DeleteFunc(s.segs, func(seg *segment) bool {
		if !seg.sealed || seg.spilled || seg.written < seg.records {
			return false
		}
		s.drop(seg)
		return true
	})
}

// drop deletes seg's file. Callers hold mu and remove seg from segs.
func (s *spool) drop(seg *segment) {
	s.bytes -= seg.bytes
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "usage spool: stored segment not deleted", slog.Any("err", err))
	}
}

// nextSpilled returns the oldest spilled segment, sealed so that its file
// no longer changes, or nil if there is none.
func (s *spool) nextSpilled() *segment {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.segs, func(seg *segment) bool { return seg.spilled })
	if i < 0 {
		return nil
	}
	seg := s.segs[i]
	if !seg.sealed {
		s.seal()
	}
	return seg
}

// size is the bytes in all of segs; 0 on a nil spool (no spool).
func (s *spool) size() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// setAsideName is the file under the spool directory, beside the writers'
// directories, that keeps the records the store refused: frames as in a
// segment, appended by every writer sharing the directory.
const setAsideName = "set-aside" + segmentExt

// setAside appends rec's frame to the set-aside file and returns the
// file's path; "" without a spool, where the record is only logged.
func (s *spool) setAside(rec *sluice.UsageRecord) (string, error) {
	if s == nil {
		return "", nil
	}
	path := filepath.Join(filepath.Dir(s.dir), setAsideName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return path, err
	}
	_, err = f.Write(appendFrame(nil, rec))
	return path, errors.Join(err, f.Close())
}

// replayed deletes a spilled segment whose records are all done.
func (s *spool) replayed(seg *segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.segs, seg); i >= 0 {
		s.segs = slices.Delete(s.segs, i, i+1)
		s.drop(seg)
	}
}

// close seals the active segment and releases the lock. A directory with
// nothing left is removed; one with records the store did not take stays,
// and the next start adopts it.
func (s *spool) close() (left int64) {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seal()
	if len(s.segs) == 0 {
		if err := os.RemoveAll(s.dir); err != nil {
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "usage spool: empty directory not removed", slog.Any("err", err))
		}
	}
	s.lock.Close()
	return s.bytes
}
