package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	sent      [][]any // the arguments of every capacity call sent, alone or in a batch
	batches   []int   // the number of calls of each batch sent
	pipelines []int   // the number of commands of each pipeline
}

func (l *sendLog) record(c redis.Cmder) {
	if c.Name() != "fcall" {
		return
	}
	args := c.Args()
	rest := args[3+args[2].(int):] // after FCALL, its name, the key count and the keys
	if !strings.Contains(args[1].(string), "_batch_") {
		l.sent = append(l.sent, rest)
		return
	}
	calls := 0
	for len(rest) > 0 {
		n := rest[0].(int)
		l.sent = append(l.sent, rest[1:1+n])
		rest = rest[1+n:]
		calls++
	}
	l.batches = append(l.batches, calls)
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
	if len(log.batches) == 0 || slices.Max(log.batches) < 2 {
		t.Errorf("batches of %v calls: the calls made while the workers were busy were not sent as one", log.batches)
	}
}

// TestBatchedCallFailsAlone: a call of a batch that fails gets its error,
// the others their replies.
func TestBatchedCallFailsAlone(t *testing.T) {
	s := newTestBackend(t).replica()
	if err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	// acquire's arguments (see Store.Acquire) for one candidate, unit u of
	// cap 8 on credential c; candidates is its count of candidates.
	call := func(ticket string, candidates any) []any {
		return []any{ticket, "q", "r", 5000, s.wakePrefix(), 0, candidates, 0, "", 1, 0,
			"u", "c", 8, 0, 100, 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	}
	args := fcallArgs(acquireScript.batchNameArg, s.domain("dom").keyArgs, 0)
	for _, c := range [][]any{call("t1", 1), call("t2", "one"), call("t3", 1)} {
		args = append(args, len(c))
		args = append(args, c...)
	}
	cmd := newFcall(t.Context(), args)
	if err := s.rdb.Process(t.Context(), cmd); err != nil {
		t.Fatal(err)
	}
	replies, err := cmd.Slice()
	if err != nil || len(replies) != 3 {
		t.Fatalf("batch of 3 calls = %v, %v", replies, err)
	}
	for _, i := range []int{0, 2} {
		if r, ok := replies[i].([]any); !ok || len(r) == 0 || r[0] != int64(1) {
			t.Errorf("call %d = %#v, want a grant", i, replies[i])
		}
	}
	if err, ok := replies[1].(error); !ok || !strings.Contains(err.Error(), "arithmetic") {
		t.Errorf("call 1, with a candidate count that is no number = %#v, want its script error", replies[1])
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
