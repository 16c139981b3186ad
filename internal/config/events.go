package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Events publishes the usage of every settled request as events on NATS
// JetStream (docs/events.md). Off unless nats is set: the embedded default
// publishes nothing. Read at start: a change takes effect at the next
// start.
type Events struct {
	NATS *EventsNATS `yaml:"nats"`
	// Consumer is what `sluice consume` writes the events into; serve
	// ignores it.
	Consumer EventsConsumer `yaml:"consumer"`
}

// EventsNATS locates the JetStream stream events are published to.
type EventsNATS struct {
	// URL is the server: nats:// or tls://, several separated by commas.
	// A user or password in it is refused: TokenEnv or CredsFile hold
	// credentials, so that none is in the catalog.
	URL string `yaml:"url"`
	// Stream is the JetStream stream, created (file storage) when missing.
	// Default SLUICE_USAGE.
	Stream string `yaml:"stream"`
	// SubjectPrefix leads every subject: <prefix>.<kind>.<tenant>. The
	// stream takes <prefix>.>. Default sluice.usage.
	SubjectPrefix string `yaml:"subject_prefix"`
	// DuplicateWindow is how long the stream remembers message IDs: a
	// publish repeated within it (after a lost acknowledgement, a restart,
	// a replay of the spool) is dropped as a duplicate. Default 15m.
	DuplicateWindow Duration `yaml:"duplicate_window"`
	// TokenEnv names the environment variable holding a token the server
	// authenticates; CredsFile is a NATS credentials file (a user JWT and
	// its NKey seed). At most one of them.
	TokenEnv  string `yaml:"token_env"`
	CredsFile string `yaml:"creds_file"`
}

// EventsConsumer is the reporting database of `sluice consume` and the
// durable JetStream consumer it reads with.
type EventsConsumer struct {
	// The database: postgres:// (or sqlite://path), by exactly one of URL,
	// URLEnv and URLFile as for database.
	URL     string `yaml:"url"`
	URLEnv  string `yaml:"url_env"`
	URLFile string `yaml:"url_file"`
	// Durable names the JetStream consumer, which remembers what was
	// acknowledged across restarts. Default sluice-reporting.
	Durable string `yaml:"durable"`
}

// Set reports whether the consumer section says anything.
func (c *EventsConsumer) Set() bool { return *c != EventsConsumer{} }

// LoadURL returns the reporting database's URL, read as for
// Database.LoadURL.
func (c *EventsConsumer) LoadURL(lookupEnv func(string) (string, bool)) (string, error) {
	u, _, err := readURL(c.URL, c.URLEnv, c.URLFile, lookupEnv)
	return u, err
}

// Token returns the token of TokenEnv, "" when none is named. Errors name
// the variable, never its value.
func (n *EventsNATS) Token(lookupEnv func(string) (string, bool)) (string, error) {
	if n.TokenEnv == "" {
		return "", nil
	}
	return readEnv("token_env", n.TokenEnv, lookupEnv)
}

// Defaults of the events section.
const (
	DefaultEventsStream        = "SLUICE_USAGE"
	DefaultEventsSubjectPrefix = "sluice.usage"
	DefaultEventsDurable       = "sluice-reporting"
	defaultDuplicateWindow     = Duration(15 * time.Minute)
)

// LoadEvents reads the events section of a catalog document, for a
// process that needs no more of it (sluice consume): the document is
// decoded strictly, as always, but only the events section is defaulted
// and validated, so that none of the gateway's secrets need be present.
func LoadEvents(doc []byte, lookupEnv func(string) (string, bool)) (*Events, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	c, err := Decode(doc)
	if err != nil {
		return nil, err
	}
	applyEventsDefaults(&c.Events)
	v := &validator{c: c, lookupEnv: lookupEnv}
	v.events()
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return &c.Events, nil
}

func applyEventsDefaults(e *Events) {
	if n := e.NATS; n != nil {
		setString(&n.Stream, DefaultEventsStream)
		setString(&n.SubjectPrefix, DefaultEventsSubjectPrefix)
		setDuration(&n.DuplicateWindow, defaultDuplicateWindow)
	}
	if e.Consumer.Set() {
		setString(&e.Consumer.Durable, DefaultEventsDurable)
	}
}

func (v *validator) events() {
	e := &v.c.Events
	n := e.NATS
	if n == nil {
		if e.Consumer.Set() {
			v.addf("events.consumer", "needs events.nats, the stream it reads")
		}
		return
	}
	v.natsURL("events.nats.url", n.URL)
	if msg := checkStreamName(n.Stream); msg != "" {
		v.addf("events.nats.stream", "%s", msg)
	}
	if msg := checkSubjectPrefix(n.SubjectPrefix); msg != "" {
		v.addf("events.nats.subject_prefix", "%s", msg)
	}
	if n.DuplicateWindow <= 0 {
		v.addf("events.nats.duplicate_window", "must be > 0")
	}
	switch {
	case n.TokenEnv != "" && n.CredsFile != "":
		v.addf("events.nats", "set only one of token_env and creds_file")
	case n.TokenEnv != "":
		if tok, err := n.Token(v.lookupEnv); err != nil {
			v.secret("events.nats", err)
		} else if strings.TrimSpace(tok) == "" {
			v.addf("events.nats.token_env", "environment variable %s is empty", n.TokenEnv)
		}
	case n.CredsFile != "":
		if f, err := os.Open(n.CredsFile); err != nil {
			v.addf("events.nats.creds_file", "%v", err) // a *PathError: the file, not its content
		} else {
			f.Close()
		}
	}
	if c := &e.Consumer; c.Set() {
		if u, at := v.url("events.consumer", c.URL, c.URLEnv, c.URLFile); u != "" {
			if s := scheme(u); s != "postgres" && s != "postgresql" && s != "sqlite" {
				v.addf(at, "must start with postgres://, postgresql:// or sqlite://")
			}
		}
		if msg := checkStreamName(c.Durable); msg != "" {
			v.addf("events.consumer.durable", "%s", msg)
		}
	}
}

// natsURL checks a NATS server list: nats:// or tls:// URLs with a host,
// comma-separated, without credentials.
func (v *validator) natsURL(path, list string) {
	if strings.TrimSpace(list) == "" {
		v.addf(path, "required: nats://host:port (several separated by commas)")
		return
	}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Host == "":
			// url.Error quotes the whole URL, password included.
			v.addf(path, "not a valid NATS URL; want nats://host:port")
		case u.Scheme != "nats" && u.Scheme != "tls":
			v.addf(path, "must start with nats:// or tls://, got %q", u.Scheme+"://")
		case u.User != nil:
			v.addf(path, "holds a user or password; name the token's variable in token_env, or a creds_file, instead")
		}
	}
}

// checkStreamName returns what is wrong with a JetStream stream or durable
// consumer name, or "": the server refuses names with whitespace, '.', '*',
// '>' or a path separator, since they become subjects and file names.
func checkStreamName(s string) string {
	if s == "" {
		return "required"
	}
	if len(s) > 255 {
		return "is longer than 255 bytes"
	}
	if strings.ContainsAny(s, ".*>/\\") || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Sprintf("%q may not contain '.', '*', '>', '/', '\\\\', spaces or control characters", s)
	}
	return ""
}

// checkSubjectPrefix returns what is wrong with a subject prefix, or "":
// dot-separated tokens, none empty or a wildcard, no whitespace, not in the
// server's own $ namespace.
func checkSubjectPrefix(s string) string {
	if s == "" {
		return "required"
	}
	if strings.HasPrefix(s, "$") {
		return fmt.Sprintf("%q is in the server's reserved $ namespace", s)
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Sprintf("%q must be dot-separated tokens without wildcards, spaces or empty tokens", s)
		}
	}
	return ""
}
