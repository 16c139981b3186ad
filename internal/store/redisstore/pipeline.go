package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner sends the capacity calls of concurrent requests to Redis
// together: the calls that arrive while a worker waits for Redis go out as
// one pipeline, one write and one read for all of them. A call costs the
// gateway its system calls far more than its encoding: each write on a
// loopback connection runs Redis's side of the network and wakes it up in
// the caller's time (bench/RESULTS.md, issue #16). A call that finds a
// worker idle is sent alone, as a plain command, with its caller's context.
//
// Unlike go-redis's AutoPipeliner, it honours every caller's deadline: a
// caller whose context ends returns at once, and a call whose context ended
// while it waited for a worker is never sent. A pipeline runs until the
// latest deadline of its calls, so a stalled Redis holds a worker no longer
// than its slowest caller would have waited alone.
type pipeliner struct {
	rdb   redis.UniversalClient
	calls chan *pendingCall
	start sync.Once
	wg    sync.WaitGroup

	// mu orders the calls queued against close: once closed is set, no
	// call is queued, and the workers answer those queued before it.
	mu     sync.RWMutex
	closed bool
	stop   chan struct{}
}

// pipelineWorkers is how many pipelines are in flight at most: one
// collects the calls that arrive while the other waits for Redis.
// maxPipeline bounds one pipeline, so one large batch does not hold the
// calls behind it for long.
const (
	pipelineWorkers = 2
	maxPipeline     = 64
)

type pendingCall struct {
	ctx  context.Context
	fn   *function
	args []any         // the whole FCALL's (see function.call)
	cmd  *redis.Cmd    // set by the worker: the call's own command, or one given its part of a batch's reply
	done chan struct{} // closed once cmd holds its reply or error
}

// alone makes the call's own command, sent alone or in a pipeline: only
// then is it built, as a batched call never needs it.
func (c *pendingCall) alone() *redis.Cmd {
	c.cmd = newFcall(c.ctx, c.args)
	return c.cmd
}

func newPipeliner(rdb redis.UniversalClient) *pipeliner {
	return &pipeliner{rdb: rdb, calls: make(chan *pendingCall, 1024), stop: make(chan struct{})}
}

// do calls f with args (the whole FCALL's), with others when others are
// waiting, and returns its command answered; or, when ctx ends first, a
// command failed with ctx's error (the call may still be answered later).
func (p *pipeliner) do(ctx context.Context, f *function, args []any) *redis.Cmd {
	c := &pendingCall{ctx: ctx, fn: f, args: args, done: make(chan struct{})}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		cmd := c.alone()
		_ = p.rdb.Process(ctx, cmd)
		return cmd
	}
	p.start.Do(func() {
		p.wg.Add(pipelineWorkers)
		for range pipelineWorkers {
			go p.work()
		}
	})
	select {
	case p.calls <- c:
		p.mu.RUnlock()
	case <-ctx.Done():
		p.mu.RUnlock()
		return failedCmd(ctx)
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		return failedCmd(ctx)
	}
}

func failedCmd(ctx context.Context) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ctx.Err())
	return cmd
}

// close stops the workers once the calls queued are answered; calls made
// after it go out one by one.
func (p *pipeliner) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *pipeliner) work() {
	defer p.wg.Done()
	batch := make([]*pendingCall, 0, maxPipeline)
	for {
		select {
		case c := <-p.calls:
			batch = append(batch[:0], c)
		case <-p.stop:
			select {
			case c := <-p.calls: // queued before close: answer it first
				batch = append(batch[:0], c)
			default:
				return
			}
		}
	collect:
		for len(batch) < maxPipeline {
			select {
			case c := <-p.calls:
				batch = append(batch, c)
			default:
				break collect
			}
		}
		p.send(batch)
		clear(batch) // let the answered calls go
	}
}

// send answers the calls of batch whose callers still wait: alone, with
// the caller's context; together, in one pipeline, where the calls of one
// function to one domain go as one call of its batch form.
func (p *pipeliner) send(batch []*pendingCall) {
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd = failedCmd(c.ctx) // its caller has returned, or is returning: never send it
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		_ = p.rdb.Process(live[0].ctx, live[0].alone())
	default:
		ctx, cancel := latestDeadline(live)
		pipe := p.rdb.Pipeline()
		cmds := batchCalls(ctx, live)
		for _, b := range cmds {
			_ = pipe.Process(ctx, b.cmd)
		}
		_, _ = pipe.Exec(ctx) // each command holds its own reply or error
		for _, b := range cmds {
			b.answer()
		}
		cancel()
	}
	for _, c := range live {
		close(c.done)
	}
}

// pipelined is one command of a pipeline: a call alone (calls is nil), or
// the batch form of the calls of one function to one domain.
type pipelined struct {
	cmd   *redis.Cmd
	calls []*pendingCall
}

// batchCalls returns the commands of a pipeline answering calls, in the
// order of their first calls.
func batchCalls(ctx context.Context, calls []*pendingCall) []pipelined {
	type domainCall struct {
		fn     *function
		domain any // the first key, which names the domain
	}
	out := make([]pipelined, 0, len(calls))
	index := make(map[domainCall]int)
	for _, c := range calls {
		if !c.fn.batched {
			out = append(out, pipelined{cmd: c.alone()})
			continue
		}
		k := domainCall{c.fn, c.args[3]}
		if i, ok := index[k]; ok {
			out[i].calls = append(out[i].calls, c)
			continue
		}
		index[k] = len(out)
		out = append(out, pipelined{calls: []*pendingCall{c}})
	}
	for i := range out {
		b := &out[i]
		if len(b.calls) == 1 {
			b.cmd, b.calls = b.calls[0].alone(), nil
		}
		if b.calls == nil {
			continue
		}
		n := 0
		for _, c := range b.calls {
			_, rest := splitFcall(c.args)
			n += 1 + len(rest)
		}
		first := b.calls[0]
		keys, _ := splitFcall(first.args)
		args := fcallArgs(first.fn.batchNameArg, keys, n)
		for _, c := range b.calls {
			_, rest := splitFcall(c.args)
			args = append(args, len(rest))
			args = append(args, rest...)
		}
		b.cmd = newFcall(ctx, args)
	}
	return out
}

// answer gives each call of a batch its part of the batch's reply: a value,
// or an error of its own; or the batch's error when it failed as a whole.
func (b pipelined) answer() {
	if b.calls == nil {
		return
	}
	replies, err := b.cmd.Slice()
	if err == nil && len(replies) != len(b.calls) {
		err = fmt.Errorf("redisstore: %d replies to a batch of %d calls", len(replies), len(b.calls))
	}
	for i, c := range b.calls {
		c.cmd = redis.NewCmd(c.ctx)
		if err != nil {
			c.cmd.SetErr(err)
		} else if e, ok := replies[i].(error); ok {
			c.cmd.SetErr(e)
		} else {
			c.cmd.SetVal(replies[i])
		}
	}
}

// latestDeadline is a context that ends at the latest deadline of calls,
// or has none when one of them has none.
func latestDeadline(calls []*pendingCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
