package app_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/testenv"
)

// eventStream is a JetStream stream of one test's own, on the server at url.
type eventStream struct {
	t                 *testing.T
	url, name, prefix string
}

// newEventStream names a stream for t on url, deleted when t ends.
func newEventStream(t *testing.T, url string) *eventStream {
	t.Helper()
	name := "SLUICE_T_" + rand.Text()[:10]
	s := &eventStream{t: t, url: url, name: name, prefix: "t." + strings.ToLower(name)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if js, nc, err := s.connect(); err == nil {
			defer nc.Close()
			if err := js.DeleteStream(ctx, s.name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Logf("delete stream %s: %v", s.name, err)
			}
		}
	})
	return s
}

// section is the catalog's events section for this stream; consumer is
// its consumer section (flow YAML, "" for none).
func (s *eventStream) section(consumer string) string {
	out := fmt.Sprintf("events:\n  nats: {url: %q, stream: %q, subject_prefix: %q, duplicate_window: 10m}\n", s.url, s.name, s.prefix)
	if consumer != "" {
		out += "  consumer: " + consumer + "\n"
	}
	return out
}

func (s *eventStream) connect() (jetstream.JetStream, *nats.Conn, error) {
	nc, err := nats.Connect(s.url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc, nil
}

// count is the number of messages the stream holds (0 before it exists).
func (s *eventStream) count() uint64 {
	s.t.Helper()
	js, nc, err := s.connect()
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	st, err := js.Stream(s.t.Context(), s.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return info.State.Msgs
}

// all returns every message of the stream: subject, headers and data
// (none before it exists).
func (s *eventStream) all() []*jetstream.RawStreamMsg {
	s.t.Helper()
	js, nc, err := s.connect()
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	st, err := js.Stream(s.t.Context(), s.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	var msgs []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(s.t.Context(), seq)
		if err != nil {
			s.t.Fatalf("message %d: %v", seq, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestEventsCarryNoSecrets serves chat and Messages through an oauth
// credential (and chat through a static one) with events on: no event —
// subject, headers or body — holds an upstream secret, an oauth access or
// refresh token, a static header's value, a virtual key or an admin token.
func TestEventsCarryNoSecrets(t *testing.T) {
	s := newEventStream(t, testenv.NATS(t))
	g := startOAuthGatewayWith(t, func(sim *simulator.Simulator) string { return sim.NewRefreshToken(simulator.Behavior{}, time.Hour) }, s.section(""))
	eventually(t, 5*time.Second, "the first access token", func() bool { return g.sim.Refreshes() == 1 })
	recorded := 0 // requests with a usage record
	eventually(t, 5*time.Second, "chat served by cred-oauth", func() bool {
		if code, _, body := g.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
			t.Fatalf("chat = %d %s", code, body)
		}
		recorded++
		return len(g.sim.Requests()) > 0
	})
	for range 3 {
		g.post(t.Context(), "/v1/messages", keyWeb, `{"model":"claude","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
		recorded++
	}
	// The 401 has no usage record: a request refused for its key is not
	// anyone's usage.
	if code, _, _ := g.post(t.Context(), "/v1/chat/completions", "sk-not-a-key-SECRET-91c3", chatBody); code != 401 {
		t.Fatalf("unknown key = %d, want 401", code)
	}
	eventually(t, 10*time.Second, fmt.Sprintf("the request events of %d requests", recorded), func() bool {
		n := 0
		for _, m := range s.all() {
			if strings.HasPrefix(m.Subject, s.prefix+".request.") {
				n++
			}
		}
		return n == recorded
	})

	secret := regexp.MustCompile(`sim-o(a|r)t-[0-9a-f]+|[a-z]+-HEADER-[0-9a-f]{4}|SECRET|KEY-|admin-[a-z]*-?token`)
	var oauthServed bool
	for _, m := range s.all() {
		text := m.Subject + fmt.Sprint(m.Header) + string(m.Data)
		if found := secret.FindString(text); found != "" {
			t.Errorf("event %s holds a secret (%s): %s", m.Header.Get(nats.MsgIdHdr), found, text)
		}
		for name, value := range testEnv {
			if strings.Contains(text, value) {
				t.Errorf("event %s holds $%s", m.Header.Get(nats.MsgIdHdr), name)
			}
		}
		oauthServed = oauthServed || strings.Contains(string(m.Data), `"credential_id":"cred-oauth"`)
	}
	if !oauthServed {
		t.Error("no event names cred-oauth: the test checked nothing it served")
	}
}

// A gateway whose NATS is unreachable at start still starts and serves;
// its records wait for the stream in memory (and the spool).
func TestEventsNATSDownAtStart(t *testing.T) {
	srv := testenv.StartNATS(t)
	srv.Kill()
	s := newEventStream(t, srv.URL())
	h := newHarnessWith(t, catalogTemplate+s.section(""), "{backend: memory}", simulator.Options{})
	for range 3 {
		if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
			t.Fatalf("chat with NATS down = %d %s", code, body)
		}
	}
	eventually(t, 5*time.Second, "3 records waiting for the stream", func() bool {
		_, m := h.adminGet("/metrics")
		return strings.Contains(m, "sluice_usage_events_pending_records 3")
	})
	srv.Start()
	eventually(t, 15*time.Second, "the 6 events published once NATS is up", func() bool { return s.count() == 6 })
	// The stream has them a moment before the gateway has its acknowledgements.
	eventually(t, 5*time.Second, "the metrics to say so", func() bool {
		_, m := h.adminGet("/metrics")
		return strings.Contains(m, "sluice_usage_events_pending_records 0") &&
			strings.Contains(m, `sluice_usage_events_published_total{kind="request",result="ok"} 3`)
	})
	if _, m := h.adminGet("/metrics"); !strings.Contains(m, "\nsluice_usage_event_publish_failures_total ") || strings.Contains(m, "\nsluice_usage_event_publish_failures_total 0\n") {
		t.Error("metrics count no publish failure while NATS was down")
	}
}
