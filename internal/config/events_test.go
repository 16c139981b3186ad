package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// withEvents is base with events on: nats at 127.0.0.1, defaults applied.
func withEvents(t *testing.T, edit func(e *Events)) *Catalog {
	t.Helper()
	c := base(t)
	c.Events.NATS = &EventsNATS{URL: "nats://127.0.0.1:4222"}
	edit(&c.Events)
	ApplyDefaults(c)
	return c
}

func TestEventsDefaults(t *testing.T) {
	c := base(t)
	if c.Events.NATS != nil || c.Events.Consumer.Set() {
		t.Fatalf("events of a catalog without the section = %+v, want off", c.Events)
	}
	c = withEvents(t, func(e *Events) { e.Consumer.URL = "postgres://127.0.0.1/reports" })
	n := c.Events.NATS
	if n.Stream != "SLUICE_USAGE" || n.SubjectPrefix != "sluice.usage" || n.DuplicateWindow.D().String() != "15m0s" || c.Events.Consumer.Durable != "sluice-reporting" {
		t.Errorf("defaults = %+v, consumer %+v", *n, c.Events.Consumer)
	}
	if err := Validate(c, lookup(testEnv)); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
}

func TestValidateEvents(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nats.creds")
	tests := []struct {
		name string
		give func(e *Events)
		want string
	}{
		{"URLMissing", func(e *Events) { e.NATS.URL = "" }, "events.nats.url: required"},
		{"URLScheme", func(e *Events) { e.NATS.URL = "http://127.0.0.1:4222" }, `events.nats.url: must start with nats:// or tls://, got "http://"`},
		{"URLNoHost", func(e *Events) { e.NATS.URL = "nats-server:4222" }, "events.nats.url: not a valid NATS URL"},
		{"URLSecondBad", func(e *Events) { e.NATS.URL = "nats://a:4222, ws://b:4222" }, `events.nats.url: must start with nats:// or tls://, got "ws://"`},
		{"URLPassword", func(e *Events) { e.NATS.URL = "nats://sluice:hunter2@127.0.0.1:4222" }, "events.nats.url: holds a user or password"},
		{"StreamDot", func(e *Events) { e.NATS.Stream = "sluice.usage" }, `events.nats.stream: "sluice.usage" may not contain`},
		{"StreamSpace", func(e *Events) { e.NATS.Stream = "SLUICE USAGE" }, `events.nats.stream: "SLUICE USAGE" may not contain`},
		{"PrefixWildcard", func(e *Events) { e.NATS.SubjectPrefix = "sluice.*" }, `events.nats.subject_prefix: "sluice.*" must be dot-separated tokens`},
		{"PrefixEmptyToken", func(e *Events) { e.NATS.SubjectPrefix = "sluice..usage" }, `events.nats.subject_prefix: "sluice..usage" must be`},
		{"PrefixReserved", func(e *Events) { e.NATS.SubjectPrefix = "$JS.usage" }, `events.nats.subject_prefix: "$JS.usage" is in the server's reserved $ namespace`},
		{"WindowNegative", func(e *Events) { e.NATS.DuplicateWindow = -1 }, "events.nats.duplicate_window: must be > 0"},
		{"TokenAndCreds", func(e *Events) { e.NATS.TokenEnv, e.NATS.CredsFile = "NATS_TOKEN", missing }, "events.nats: set only one of token_env and creds_file"},
		{"TokenUnset", func(e *Events) { e.NATS.TokenEnv = "NOPE" }, "events.nats.token_env: environment variable NOPE is not set"},
		{"TokenEmpty", func(e *Events) { e.NATS.TokenEnv = "BLANK" }, "events.nats.token_env: environment variable BLANK is empty"},
		{"CredsMissing", func(e *Events) { e.NATS.CredsFile = missing }, "events.nats.creds_file: open " + missing},
		{"ConsumerWithoutNATS", func(e *Events) { e.NATS, e.Consumer.URL = nil, "postgres://127.0.0.1/reports" }, "events.consumer: needs events.nats"},
		{"ConsumerURLMissing", func(e *Events) { e.Consumer.Durable = "reports" }, "events.consumer.url: required"},
		{"ConsumerURLTwice", func(e *Events) { e.Consumer.URL, e.Consumer.URLEnv = "postgres://x/y", "SLUICE_KEY_WEB" }, "events.consumer: set only one of url"},
		{"ConsumerURLScheme", func(e *Events) { e.Consumer.URL = "mysql://127.0.0.1/reports" }, "events.consumer.url: must start with postgres://"},
		{"DurableDot", func(e *Events) { e.Consumer.URL, e.Consumer.Durable = "postgres://x/y", "a.b" }, `events.consumer.durable: "a.b" may not contain`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(withEvents(t, tt.give), lookup(testEnv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q holds the URL's password", err)
			}
		})
	}
}

// LoadEvents checks the events section only: a catalog whose credentials'
// variables are not set here still gives its events section, defaulted.
func TestLoadEventsReadsOnlyItsSection(t *testing.T) {
	doc := baseYAML + "events:\n  nats: {url: nats://127.0.0.1:4222}\n  consumer: {url_env: REPORTS_URL}\n"
	ev, err := LoadEvents([]byte(doc), lookup(map[string]string{"REPORTS_URL": "postgres://127.0.0.1/reports"}))
	if err != nil {
		t.Fatalf("LoadEvents = %v", err)
	}
	if ev.NATS.Stream != DefaultEventsStream || ev.Consumer.Durable != DefaultEventsDurable {
		t.Errorf("LoadEvents = %+v, %+v; want the defaults applied", *ev.NATS, ev.Consumer)
	}
	if _, err := LoadEvents([]byte(doc), lookup(nil)); err == nil || !strings.Contains(err.Error(), "events.consumer.url_env: environment variable REPORTS_URL is not set") {
		t.Errorf("LoadEvents without REPORTS_URL = %v", err)
	}
	if _, err := LoadEvents([]byte(doc+"bogus: 1\n"), lookup(nil)); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("LoadEvents with an unknown field = %v, want it refused", err)
	}
}
