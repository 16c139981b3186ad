package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store"
)

// sendLog records the capacity calls the client sends, alone or in
// pipelines, and holds each one sent alone for delay before sending it:
// long enough that the calls made meanwhile wait for a worker.
type sendLog struct {
	delay time.Duration
	held  atomic.Int32 // calls being held

	mu        sync.Mutex
	sent      [][]any // the args of every FCALL sent
	pipelines []int   // the number of commands of each pipeline
}

func (l *sendLog) record(c redis.Cmder) {
	if c.Name() == "fcall" {
		l.sent = append(l.sent, c.Args())
	}
}

func (l *sendLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *sendLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if c.Name() == "fcall" {
			l.held.Add(1)
			time.Sleep(l.delay)
		}
		l.mu.Lock()
		l.record(c)
		l.mu.Unlock()
		return next(ctx, c)
	}
}

func (l *sendLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		l.mu.Lock()
		l.pipelines = append(l.pipelines, len(cs))
		for _, c := range cs {
			l.record(c)
		}
		l.mu.Unlock()
		return next(ctx, cs)
	}
}

// TestConcurrentCallsSharePipelines: the calls made while both workers
// are busy go out together, and each caller gets its own answer.
func TestConcurrentCallsSharePipelines(t *testing.T) {
	s := newTestBackend(t).replica()
	log := &sendLog{delay: 50 * time.Millisecond}
	s.rdb.AddHook(log)
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}

	const callers, capacity = 20, 5
	grants := make([]store.Grant, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { grants[i] = acquire(t, s, req(fmt.Sprintf("t%d", i), cand("u", capacity, "c"))) })
	}
	wg.Wait()

	granted, queued := 0, map[int]bool{}
	for i, g := range grants {
		switch {
		case g.Granted:
			granted++
			if g.Lease != fmt.Sprintf("t%d", i) {
				t.Errorf("caller %d got lease %q", i, g.Lease)
			}
		default:
			queued[g.Position] = true
		}
	}
	if granted != capacity || len(queued) != callers-capacity {
		t.Errorf("%d granted and %d distinct queue positions, want %d and %d: %+v", granted, len(queued), capacity, callers-capacity, grants)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.sent) != callers {
		t.Errorf("%d calls sent, want %d", len(log.sent), callers)
	}
	if len(log.pipelines) == 0 || slices.Max(log.pipelines) < 2 {
		t.Errorf("pipelines of %v commands: the calls made while the workers were busy were not sent together", log.pipelines)
	}
}

// TestPipelinedCallKeepsItsDeadline: a caller whose context ends while it
// waits for a busy worker returns then, with its context's error, and its
// call is never sent (its lease would outlive a caller that gave up).
func TestPipelinedCallKeepsItsDeadline(t *testing.T) {
	s := newTestBackend(t).replica()
	log := &sendLog{delay: 400 * time.Millisecond}
	s.rdb.AddHook(log)
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range pipelineWorkers { // occupy every worker, one call each
		wg.Go(func() { acquire(t, s, req(fmt.Sprintf("busy%d", i), cand("u", 10, "c"))) })
		for deadline := time.Now().Add(2 * time.Second); log.held.Load() < int32(i+1); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("call busy%d not sent", i)
			}
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Acquire(ctx, req("late", cand("u", 10, "c")))
	waited := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Acquire past its deadline: %v, want unavailable with context.DeadlineExceeded", err)
	}
	if waited > 250*time.Millisecond {
		t.Errorf("Acquire returned after %v: it waited for the busy workers instead of its 50ms deadline", waited)
	}
	wg.Wait()
	// The workers are free again: a call sent now goes before the check.
	acquire(t, s, req("after", cand("u", 10, "c")))

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, args := range log.sent {
		if slices.Contains(args, any("late")) {
			t.Errorf("the call whose caller gave up was sent: %v", args)
		}
	}
}

// TestPipelinerCloseStrandsNoCall: calls made while the Store closes are
// all answered, queued ones by the workers before they stop and later ones
// one by one; none waits out its deadline.
func TestPipelinerCloseStrandsNoCall(t *testing.T) {
	s := newTestBackend(t).replica()
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		if i == 50 {
			wg.Go(func() { s.pipe.close() })
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := s.Acquire(ctx, req(fmt.Sprintf("t%d", i), cand("u", 10, "c"))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call made while closing: %v", err)
	}
}
