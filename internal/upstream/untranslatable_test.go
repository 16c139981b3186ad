package upstream

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// requestOnly is a translator whose Request answers err and counts its
// calls; an attempt would call its other methods, Untranslatable never.
type requestOnly struct {
	adapter.Translator
	err     error
	calls   *int
	dropped []string // what its Request leaves out
}

func (r requestOnly) Request(*sluice.Request, string) ([]byte, error) {
	*r.calls++
	return []byte(`{}`), r.err
}

func (r requestOnly) Dropped() []string { return r.dropped }

func TestUntranslatable(t *testing.T) {
	refused := adapter.Untranslatable("n > 1 is not supported")
	var toMessages, toGemini int
	p := *testProtocols
	p.Translators = map[Pair]func() adapter.Translator{
		{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolAnthropic}: func() adapter.Translator {
			return requestOnly{err: refused, calls: &toMessages}
		},
		{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolGemini}: func() adapter.Translator {
			return requestOnly{err: errors.New("not a refusal of the request"), calls: &toGemini}
		},
	}
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), &p, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
	t.Cleanup(c.Close)
	edge := func(p sluice.Protocol) *sluice.Edge { return &sluice.Edge{Protocol: p, Model: "m"} }
	messages, gemini, chat := edge(sluice.ProtocolAnthropic), edge(sluice.ProtocolGemini), edge(sluice.ProtocolOpenAIChat)
	req := &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "a", Body: []byte(`{"model":"a","n":2}`)}
	for _, tc := range []struct {
		name               string
		edges              []*sluice.Edge
		count              bool
		want               error
		messages, geminiTr int // translations run
	}{
		{"every edge refuses, translated once per protocol", []*sluice.Edge{messages, messages}, false, refused, 1, 0},
		{"a passthrough edge takes it", []*sluice.Edge{messages, chat}, false, nil, 1, 0},
		{"a passthrough edge first costs nothing", []*sluice.Edge{chat, messages}, false, nil, 0, 0},
		{"another error is the attempt's to judge", []*sluice.Edge{messages, gemini}, false, nil, 1, 1},
		{"a count is never translated", []*sluice.Edge{messages}, true, nil, 0, 0},
	} {
		toMessages, toGemini = 0, 0
		req.CountTokens = tc.count
		made, err := c.Untranslatable(req, tc.edges)
		if err != tc.want || toMessages != tc.messages || toGemini != tc.geminiTr {
			t.Errorf("%s: Untranslatable = %v after %d, %d translations; want %v after %d, %d", tc.name, err, toMessages, toGemini, tc.want, tc.messages, tc.geminiTr)
		}
		if made != nil {
			t.Errorf("%s: Untranslatable kept a translation, want none (no translator accepted the request)", tc.name)
		}
	}
}

// The translation that shows an edge can carry the request is kept for
// one attempt on an edge of its protocol and model, and only one.
func TestUntranslatableKeepsItsTranslation(t *testing.T) {
	var calls int
	p := *testProtocols
	p.Translators = map[Pair]func() adapter.Translator{
		{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolAnthropic}: func() adapter.Translator {
			return requestOnly{calls: &calls}
		},
	}
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), &p, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
	t.Cleanup(c.Close)
	req := &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "a", Body: []byte(`{"model":"a"}`)}
	messages := &sluice.Edge{Protocol: sluice.ProtocolAnthropic, Model: "m"}
	made, err := c.Untranslatable(req, []*sluice.Edge{messages})
	if err != nil || made == nil || calls != 1 {
		t.Fatalf("Untranslatable = %v, %v after %d translations; want the translation it made, once", made, err, calls)
	}
	for _, other := range []*sluice.Edge{
		{Protocol: sluice.ProtocolAnthropic, Model: "another model"},
		{Protocol: sluice.ProtocolGemini, Model: "m"},
	} {
		if _, _, ok := made.take(other); ok {
			t.Errorf("take(%s %s) = ok, want the translation kept for %s %s", other.Protocol, other.Model, messages.Protocol, messages.Model)
		}
	}
	if _, body, ok := made.take(messages); !ok || string(body) != `{}` {
		t.Errorf("take(messages) = %q, %v; want the body made before the claim", body, ok)
	}
	if _, _, ok := made.take(messages); ok {
		t.Errorf("second take(messages) = ok, want the translation used once (its translator keeps one attempt's state)")
	}
}

// A caller asking for strict translation is refused, naming the fields,
// by an edge whose translator would drop some; another protocol's
// translator that drops nothing serves it, and without the header the
// translation that drops them is kept.
func TestUntranslatableStrict(t *testing.T) {
	var toMessages, toGemini int
	p := *testProtocols
	p.Translators = map[Pair]func() adapter.Translator{
		{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolAnthropic}: func() adapter.Translator {
			return requestOnly{calls: &toMessages, dropped: []string{"seed"}}
		},
		{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolGemini}: func() adapter.Translator {
			return requestOnly{calls: &toGemini}
		},
	}
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), &p, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
	t.Cleanup(c.Close)
	messages := &sluice.Edge{Protocol: sluice.ProtocolAnthropic, Model: "m"}
	gemini := &sluice.Edge{Protocol: sluice.ProtocolGemini, Model: "m"}
	req := &sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Model: "a", Body: []byte(`{"model":"a","seed":1}`), StrictTranslation: true}
	made, err := c.Untranslatable(req, []*sluice.Edge{messages})
	e, ok := errors.AsType[*sluice.Error](err)
	if made != nil || !ok || e.Code != sluice.CodeInvalidRequest || !strings.HasPrefix(e.Msg, "seed cannot be carried to this model's upstream (Anthropic Messages)") {
		t.Errorf("strict on a dropping edge: Untranslatable = %v, %v; want invalid_request naming seed and the upstream", made, err)
	}
	if made, err = c.Untranslatable(req, []*sluice.Edge{messages, gemini}); err != nil || made == nil || made.protocol != sluice.ProtocolGemini {
		t.Errorf("strict with a Gemini edge dropping nothing: Untranslatable = %v, %v; want Gemini's translation", made, err)
	}
	req.StrictTranslation = false
	if made, err = c.Untranslatable(req, []*sluice.Edge{messages}); err != nil || made == nil || made.protocol != sluice.ProtocolAnthropic {
		t.Errorf("without strict: Untranslatable = %v, %v; want the translation that drops seed", made, err)
	}
}
