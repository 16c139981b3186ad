package events

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/memledger"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/settle"
	"github.com/sluicehq/sluice/internal/testenv"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// testStream is a stream of one test's own on the server at url.
func testStream(url string) *config.EventsNATS {
	name := "T_" + rand.Text()[:10]
	return &config.EventsNATS{URL: url, Stream: name, SubjectPrefix: "t." + strings.ToLower(name),
		DuplicateWindow: config.Duration(time.Minute)}
}

// billed is a billed chat request with one execution: three events.
func billed(i int) sluice.UsageRecord {
	now := time.Now()
	return sluice.UsageRecord{
		RequestID: fmt.Sprintf("req-%05d", i), KeyID: "web", Tenant: "web", Alias: "one", Protocol: sluice.ProtocolOpenAIChat,
		Status: 200, Started: now, Latency: time.Millisecond,
		Usage:      sluice.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Measured: true},
		Executions: []sluice.Execution{{EdgeID: "k1/ep/m", CredentialID: "k1", AccountID: "org-1", EndpointID: "ep", Model: "m", Status: sluice.ExecutionOK, HTTPStatus: 200, Started: now}},
		Billing:    &sluice.Charge{Account: "acme", Plan: "standard", PriceVersion: "v1", Price: 100, Cost: 40},
	}
}

const eventsPerBilled = 3

// streamMsgs counts the messages stored in the stream, through a
// connection of its own.
func streamMsgs(t *testing.T, cfg *config.EventsNATS) uint64 {
	t.Helper()
	nc, err := nats.Connect(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0 // not made yet: nothing published
	}
	if err != nil {
		t.Fatalf("stream %s: %v", cfg.Stream, err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
}

// counter reads one series of a counter family of m.
func counter(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}

// TestOutboxLosesAndDoublesNothingWhenNATSDies runs a Recorder publishing
// to a private nats-server that is killed mid-run: the records reach the
// database, their spool segment outlives the Recorder, and once NATS is
// back a new Recorder publishes them from the spool. The stream then holds
// exactly records × events per record: the records published before the
// kill and published again from the same segment are dropped by their
// Nats-Msg-Id, as is a forced re-publish of everything.
func TestOutboxLosesAndDoublesNothingWhenNATSDies(t *testing.T) {
	srv := testenv.StartNATS(t)
	cfg := testStream(srv.URL())
	m := metrics.New()
	var rec *settle.Recorder
	pub, err := NewPublisher(Connection{Config: cfg, Name: "outbox-test", Log: discard}, "USD", m.WatchOutbox(func() int64 { return rec.Unpublished() }))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	store, spool := &memledger.Store{}, t.TempDir()
	if rec, err = settle.NewRecorder(store, discard, spool, 16, 10*time.Millisecond, settle.WithOutbox(pub)); err != nil {
		t.Fatal(err)
	}
	var all []sluice.UsageRecord
	record := func(from, to int) {
		for i := from; i < to; i++ {
			all = append(all, billed(i))
			rec.Record(t.Context(), all[i])
		}
	}
	stored := func() int {
		recs, err := store.ListUsage(t.Context(), ledger.UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}

	record(0, 20)
	eventually(t, 10*time.Second, "the first 20 records' events in the stream", func() bool { return streamMsgs(t, cfg) == 20*eventsPerBilled })

	srv.Kill()
	record(20, 50)
	eventually(t, 10*time.Second, "50 records in the database with NATS down", func() bool { return stored() == 50 })
	eventually(t, 10*time.Second, "30 records unpublished", func() bool { return rec.Unpublished() == 30 })
	if f := counter(t, m, "sluice_usage_event_publish_failures_total", nil); f == 0 {
		t.Error("no publish failure counted while NATS was down")
	}
	rec.Close() // NATS still down: what is not published stays in the spool
	segs, err := filepath.Glob(filepath.Join(spool, "w-*", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("spool segments after a Close with NATS down = %v (%v), want the unpublished records kept", segs, err)
	}

	srv.Start()
	if rec, err = settle.NewRecorder(store, discard, spool, 16, 10*time.Millisecond, settle.WithOutbox(pub)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the spool replayed", func() bool { return rec.SpoolBytes() == 0 })
	rec.Close()
	if got, want := streamMsgs(t, cfg), uint64(50*eventsPerBilled); got != want {
		t.Errorf("messages in the stream = %d, want %d: every event once", got, want)
	}
	if dirs, _ := filepath.Glob(filepath.Join(spool, "w-*")); len(dirs) != 0 {
		t.Errorf("spool directories left = %v, want none", dirs)
	}
	if stored() != 50 {
		t.Errorf("records in the database = %d, want 50", stored())
	}

	// The segment held the 20 records published before the kill too: they
	// went again, and the stream dropped them.
	before := counter(t, m, "sluice_usage_events_published_total", map[string]string{"kind": "request", "result": "duplicate"})
	if before != 20 {
		t.Errorf("request events acknowledged as duplicates after the replay = %v, want the 20 published before the kill", before)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, all); err != nil {
		t.Fatalf("forced re-publish = %v", err)
	}
	if got := counter(t, m, "sluice_usage_events_published_total", map[string]string{"kind": "request", "result": "duplicate"}) - before; got != 50 {
		t.Errorf("request events acknowledged as duplicates on a forced re-publish = %v, want 50", got)
	}
	if got, want := streamMsgs(t, cfg), uint64(50*eventsPerBilled); got != want {
		t.Errorf("messages in the stream after a forced re-publish = %d, want still %d", got, want)
	}
}
