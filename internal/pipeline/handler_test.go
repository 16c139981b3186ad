package pipeline

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/upstream"
)

// records is a Recorder that keeps what it is given.
type records struct {
	mu   sync.Mutex
	recs []sluice.UsageRecord
}

func (r *records) Record(_ context.Context, rec sluice.UsageRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

func (r *records) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

// watchedWriter notes how many usage records existed at each write.
type watchedWriter struct {
	*httptest.ResponseRecorder
	recs      *records
	atLastOne int // records when the last write began
}

func (w *watchedWriter) Write(b []byte) (int, error) {
	w.atLastOne = w.recs.count()
	return w.ResponseRecorder.Write(b)
}

// TestAnswerIsRecordedBeforeItsEnd checks that the usage record of an
// answered request is made before the answer's last bytes are written
// (so a caller that saw the end is never unbilled, whatever happens to the
// process next), with the answer's usage and executions, and only once.
func TestAnswerIsRecordedBeforeItsEnd(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { sim.Close(); srv.Close() })
	env := func(string) (string, bool) { return "sk-upstream", true }
	snap := compileCatalog(t, `version: 1
endpoints: [{id: ep, base_url: `+srv.URL+`, protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
keys: [{id: web, tenant: web, secret_env: KEY}]
`, env)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := memstore.New()
	live := &Live{}
	live.Swap(snap)
	for _, stream := range []bool{false, true} {
		recs := &records{}
		h := NewHandler(Stages{
			Live: live, Capacity: capacity.New(mem, mem, "r", time.Minute, log), Statuses: capacity.NewStatuses(mem, log),
			Caller: upstream.New(log, &upstream.Protocols{Dialects: map[sluice.Protocol]*upstream.Dialect{sluice.ProtocolOpenAIChat: upstream.OpenAIChat}, Endings: map[sluice.Protocol]*upstream.Ending{sluice.ProtocolOpenAIChat: upstream.OpenAIEnding}}, func(string) upstream.BreakerSettings { return upstream.BreakerSettings{Failures: 5, Open: time.Minute} }, nil),
			Usage:  recs, Log: log,
		})
		body := `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		w := &watchedWriter{ResponseRecorder: httptest.NewRecorder(), recs: recs}
		req := &sluice.Request{ID: "r1", Protocol: sluice.ProtocolOpenAIChat, Model: "fast", Stream: stream, Body: []byte(body), Received: time.Now()}
		out, err := h.Serve(t.Context(), w, req, &sluice.Principal{Key: snap.StaticKeys[0]})
		if err != nil || w.Code != 200 || (stream && !bytes.Contains(w.Body.Bytes(), []byte("[DONE]"))) {
			t.Fatalf("stream %v: Serve = %v, %d %s", stream, err, w.Code, w.Body)
		}
		if w.atLastOne != 1 || recs.count() != 1 {
			t.Fatalf("stream %v: %d records when the last bytes were written, %d in all; want 1 and 1", stream, w.atLastOne, recs.count())
		}
		got := recs.recs[0]
		if got.Status != 200 || !got.Usage.Measured || got.Usage != out.Usage || len(got.Executions) != 1 || got.Executions[0].Status != sluice.ExecutionOK {
			t.Errorf("stream %v: record %+v; want status 200, the answer's usage %+v and one ok execution", stream, got, out.Usage)
		}
	}
}
