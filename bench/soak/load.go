package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The caller protocols the latency tables are kept by.
const (
	protoChat      = "openai.chat"
	protoResponses = "openai.responses"
	protoMessages  = "anthropic.messages"
	protoGemini    = "gemini"
	protoVideos    = "openai.videos"
)

var protocols = []string{protoChat, protoResponses, protoMessages, protoGemini, protoVideos}

// call is one HTTP exchange with the gateway and what its answer must hold.
type call struct {
	method, path string
	header       map[string]string
	body         string
	want         string // the answer is complete only if it contains this
}

// workload is one kind of traffic in the mix.
type workload struct {
	name     string
	protocol string
	weight   int                                      // share of the requests started, out of the weights' sum
	run      func(l *load, ctx context.Context) error // a method expression of load
}

// outcome is one HTTP exchange as the report sees it.
type outcome struct {
	at       time.Time // when it started
	protocol string
	workload string
	latency  time.Duration // to the end of the answer (a stream's last event)
	err      error
}

// load sends the mix to the gateway and records every exchange. Its
// methods are safe for concurrent use.
type load struct {
	client  *http.Client
	base    string // http://host:port of the data plane
	secrets secrets

	mu       sync.Mutex
	outcomes []outcome
	jobs     []time.Duration // submit to completed, per video job
	sessions []*conversation
	rng      *rand.Rand
}

// conversation is one affinity session: the slot it runs in, which of the
// slot's conversations it is, and how many turns it has had.
type conversation struct{ slot, generation, turns int }

func (c *conversation) id() string { return fmt.Sprintf("soak-%d-%d", c.slot, c.generation) }

// sessionCount conversations run at once on the affinity alias; each ends
// after turnsPerSession turns and a new one (a new seed) takes its place, so
// bindings are created and expire all along the run.
const (
	sessionCount    = 16
	turnsPerSession = 8
)

func newLoad(base string, s secrets) *load {
	l := &load{
		// The gateway holds a descriptor and a goroutine per connection
		// of ours: a bounded pool, every connection kept, so that they
		// settle at the load's peak instead of tracking it (a request
		// past the bound waits here, and its latency shows it).
		client: &http.Client{Transport: &http.Transport{MaxConnsPerHost: connections, MaxIdleConnsPerHost: connections},
			Timeout: 2 * time.Minute},
		base:    base,
		secrets: s,
		rng:     rand.New(rand.NewPCG(1, 2)),
	}
	for i := range sessionCount {
		l.sessions = append(l.sessions, &conversation{slot: i})
	}
	return l
}

// do sends c with key and records the exchange under w's names.
func (l *load) do(ctx context.Context, protocol, workload string, c call) ([]byte, error) {
	start := time.Now()
	body, err := l.exchange(ctx, c)
	l.mu.Lock()
	l.outcomes = append(l.outcomes, outcome{at: start, protocol: protocol, workload: workload, latency: time.Since(start), err: err})
	l.mu.Unlock()
	return body, err
}

func (l *load) exchange(ctx context.Context, c call) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, c.method, l.base+c.path, strings.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	case !strings.Contains(string(b), c.want):
		return nil, fmt.Errorf("answer without %q: %.200s", c.want, b)
	}
	return b, nil
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

func chatCall(key, alias string, stream bool, extra map[string]string, messages string) call {
	c := call{method: http.MethodPost, path: "/v1/chat/completions", header: bearer(key),
		body: fmt.Sprintf(`{"model":%q,"stream":%t,"messages":%s}`, alias, stream, messages), want: `"finish_reason":"stop"`}
	if stream {
		c.want = "data: [DONE]"
	}
	for k, v := range extra {
		c.header[k] = v
	}
	return c
}

// responsesCall asks for a response that is not stored, as Codex does: the
// gateway keeps the binding of a stored response to its credential for 30
// days, as OpenAI keeps the response (about 1 KiB of Redis each), and a
// soak would see that, by design, as growth without end.
func responsesCall(key, alias string, stream bool) call {
	c := call{method: http.MethodPost, path: "/v1/responses", header: bearer(key),
		body: fmt.Sprintf(`{"model":%q,"stream":%t,"store":false,"input":"Tell me about rivers."}`, alias, stream), want: `"status":"completed"`}
	if stream {
		c.want = "event: response.completed"
	}
	return c
}

func messagesCall(key, alias string, stream bool) call {
	c := call{method: http.MethodPost, path: "/v1/messages",
		header: map[string]string{"X-Api-Key": key, "Anthropic-Version": "2023-06-01"},
		body: fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":256,"system":"Be terse.","messages":[{"role":"user","content":"Tell me about mountains."}]}`,
			alias, stream),
		want: `"stop_reason":"end_turn"`}
	if stream {
		c.want = "event: message_stop"
	}
	return c
}

func geminiCall(key, alias string, stream bool) call {
	c := call{method: http.MethodPost, path: "/v1beta/models/" + alias + ":generateContent",
		header: map[string]string{"X-Goog-Api-Key": key},
		body:   `{"contents":[{"role":"user","parts":[{"text":"Tell me about forests."}]}]}`,
		want:   `"finishReason":"STOP"`}
	if stream {
		c.path = "/v1beta/models/" + alias + ":streamGenerateContent?alt=sse"
	}
	return c
}

const oneTurn = `[{"role":"user","content":"Tell me about the sea."}]`

// workloads is the mix: weights out of 100, so at 60 req/s a weight of 10
// starts 6 requests a second (a video job then polls a few times more).
func workloads() []workload {
	var ws []workload
	simple := func(name, protocol string, weight int, build func(s secrets, stream bool) call) {
		for _, stream := range []bool{false, true} {
			n := name
			if stream {
				n += " stream"
			}
			ws = append(ws, workload{name: n, protocol: protocol, weight: weight, run: func(l *load, ctx context.Context) error {
				_, err := l.do(ctx, protocol, n, build(l.secrets, stream))
				return err
			}})
		}
	}
	simple("chat", protoChat, 12, func(s secrets, st bool) call { return chatCall(s.key, "chat", st, nil, oneTurn) })
	simple("chat→messages", protoChat, 4, func(s secrets, st bool) call { return chatCall(s.key, "chat-on-claude", st, nil, oneTurn) })
	simple("responses", protoResponses, 6, func(s secrets, st bool) call { return responsesCall(s.key, "resp", st) })
	simple("responses→chat", protoResponses, 3, func(s secrets, st bool) call { return responsesCall(s.key, "resp-on-chat", st) })
	simple("messages", protoMessages, 8, func(s secrets, st bool) call { return messagesCall(s.key, "claude", st) })
	simple("messages→gemini", protoMessages, 3, func(s secrets, st bool) call { return messagesCall(s.key, "claude-on-gem", st) })
	simple("gemini", protoGemini, 6, func(s secrets, st bool) call { return geminiCall(s.key, "gem", st) })
	simple("gemini→chat", protoGemini, 3, func(s secrets, st bool) call { return geminiCall(s.key, "gem-on-chat", st) })
	ws = append(ws,
		workload{name: "affinity chat", protocol: protoChat, weight: 9, run: (*load).turn},
		workload{name: "video job", protocol: protoVideos, weight: 1, run: (*load).videoJob},
	)
	return ws
}

// turn sends the next turn of one of the affinity conversations: the
// history grows, the session id stays; streamed every other turn.
func (l *load) turn(ctx context.Context) error {
	l.mu.Lock()
	s := l.sessions[l.rng.IntN(len(l.sessions))]
	id, n := s.id(), s.turns
	if s.turns++; s.turns == turnsPerSession {
		s.generation, s.turns = s.generation+1, 0
	}
	l.mu.Unlock()
	msgs := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Plan a trip, " + id}}
	for i := range n {
		msgs = append(msgs, map[string]string{"role": "assistant", "content": fmt.Sprintf("answer %d", i)},
			map[string]string{"role": "user", "content": fmt.Sprintf("and then, turn %d?", i+1)})
	}
	b, _ := json.Marshal(msgs)
	_, err := l.do(ctx, protoChat, "affinity chat", chatCall(l.secrets.key, "sticky", n%2 == 1, map[string]string{"X-Session-Id": id}, string(b)))
	return err
}

// jobPoll is how often a video job is polled; jobDeadline bounds its wait.
const (
	jobPoll     = 500 * time.Millisecond
	jobDeadline = time.Minute
)

// videoJob submits a video and polls it until it is completed: each call
// is an exchange of its own; the job's whole time is recorded apart.
func (l *load) videoJob(ctx context.Context) error {
	start := time.Now()
	body, err := l.do(ctx, protoVideos, "video submit", call{method: http.MethodPost, path: "/v1/videos", header: bearer(l.secrets.key),
		body: `{"model":"sora","prompt":"a red kite over dunes at dusk","seconds":"4"}`, want: `"id"`})
	if err != nil {
		return err
	}
	var v struct{ ID, Status string }
	if err := json.Unmarshal(body, &v); err != nil || v.ID == "" {
		return l.fail(protoVideos, "video job", fmt.Errorf("video submit answered %.200s", body))
	}
	for v.Status != "completed" {
		if v.Status == "failed" || v.Status == "cancelled" {
			return l.fail(protoVideos, "video job", fmt.Errorf("job %s", v.Status))
		}
		if time.Since(start) > jobDeadline {
			return l.fail(protoVideos, "video job", fmt.Errorf("job still %s after %v", v.Status, jobDeadline))
		}
		select {
		case <-ctx.Done():
			return nil // the run ended; the job is not the gateway's fault
		case <-time.After(jobPoll):
		}
		body, err := l.do(ctx, protoVideos, "video poll", call{method: http.MethodGet, path: "/v1/videos/" + v.ID, header: bearer(l.secrets.key), want: `"status"`})
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return l.fail(protoVideos, "video job", fmt.Errorf("video poll answered %.200s", body))
		}
	}
	l.mu.Lock()
	l.jobs = append(l.jobs, time.Since(start))
	l.mu.Unlock()
	return nil
}

// fail records a failure that is not one exchange's (a job that ended
// badly, an answer that is not a job), so that the report counts it: as
// one more exchange, of workload "video job", that failed.
func (l *load) fail(protocol, workload string, err error) error {
	l.mu.Lock()
	l.outcomes = append(l.outcomes, outcome{at: time.Now(), protocol: protocol, workload: workload, err: err})
	l.mu.Unlock()
	return err
}

// connections bounds the driver's connections to the gateway.
const connections = 64

// maxInFlight bounds the workloads running at once: past it the driver
// itself cannot keep up, which it records as an error rather than queue.
const maxInFlight = 512

// run starts rate workloads a second until ctx ends, then waits for those
// in flight (they see ctx end only if they outlive the grace period). The
// workloads come in a smooth weighted round robin: every run of the
// weights' sum starts each one exactly its weight's times, spread out.
func (l *load) run(ctx context.Context, rate float64, ws []workload, grace time.Duration) {
	total := 0
	for _, w := range ws {
		total += w.weight
	}
	credit := make([]int, len(ws))
	pick := func() workload {
		best := 0
		for i, w := range ws {
			credit[i] += w.weight
			if credit[i] > credit[best] {
				best = i
			}
		}
		credit[best] -= total
		return ws[best]
	}
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for ctx.Err() == nil {
		w := pick()
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				_ = w.run(l, callCtx)
			})
		default:
			_ = l.fail(w.protocol, w.name, errors.New("driver saturated: too many requests in flight"))
		}
		next = next.Add(interval)
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cancel()
		<-done
	}
}

// snapshot copies what was recorded so far.
func (l *load) snapshot() ([]outcome, []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.outcomes...), append([]time.Duration(nil), l.jobs...)
}

// exchanges counts the exchanges recorded so far.
func (l *load) exchanges() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.outcomes)
}
