package upstream

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/sse"
)

// Dialect is the upstream side of one protocol: where its requests go, how a
// credential is presented, how the caller's body is prepared for an edge
// that speaks the caller's protocol (zero copy but for what Sluice must
// change), and how usage and the end of a stream are read. Dialects are
// values without state, shared by every execution; which protocol has which
// is one table in package app.
type Dialect struct {
	// Path is the protocol's path, appended to an endpoint's base URL (a
	// base URL that already ends in /v1 keeps it once).
	Path string
	// CountPath is the path of the protocol's token count (Anthropic's
	// count_tokens), "" when it has none.
	CountPath string
	// Authorize sets the credential's headers, and those of the caller's
	// (caller, read only) that the protocol passes on, on an upstream
	// request's header h.
	Authorize func(h, caller http.Header, secret string)
	// Prepare adapts the caller's body, of this protocol, to an edge's model.
	Prepare func(req *sluice.Request, model string) ([]byte, error)
	// Usage reads the raw value of an answer's top-level "usage" member;
	// Measured is false when it is absent or unreadable.
	Usage func(v []byte) sluice.Usage
	// Event reads one event of a stream: it returns the usage so far, u
	// with what the event says added, whether the caller does not get the
	// event (drop: one that Sluice asked for and the caller did not) and
	// whether it ends the stream (done). An event that is malformed, or is
	// the upstream's own error (errUpstreamErrorEvent), is an error: the
	// stream failed. (Values in and out: a pointer through a func value
	// would cost an allocation per stream.)
	Event func(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error)
	// Stores says that the upstream stores the responses it answers, for
	// follow-ups that name their id (Responses' previous_response_id): a
	// passthrough reads the id (Attempt.StoredID) from the answer or the
	// stream's response.created event.
	Stores bool
}

// Ending is the caller side of a stream that cannot complete: the whole
// server-sent events, in the caller's protocol, that end a committed stream
// when the upstream's broke (Failed) or the gateway cut it when shutting
// down (Shutdown). They are built once: ending a stream allocates nothing.
type Ending struct {
	Failed, Shutdown []byte
}

// Pair is an execution whose caller speaks Caller and whose upstream speaks
// Upstream.
type Pair struct {
	Caller, Upstream sluice.Protocol
}

// Protocols is how a Caller speaks each protocol: the upstream side by the
// protocol an edge speaks, the stream ending by the caller's protocol, and
// the translators of the pairs that differ. Built once (by app) and read
// only afterwards.
type Protocols struct {
	Dialects    map[sluice.Protocol]*Dialect
	Endings     map[sluice.Protocol]*Ending
	Translators map[Pair]func() adapter.Translator
}

// CanServe reports whether a caller of protocol caller can be served by an
// endpoint speaking upstream: the same protocol, or a pair Sluice has a
// translator for.
func (p *Protocols) CanServe(caller, upstream sluice.Protocol) bool {
	return caller == upstream || p.Translators[Pair{caller, upstream}] != nil && p.Dialects[upstream] != nil
}

// dialectURL joins an endpoint's base URL and a dialect's path; a base URL
// that already ends in /v1 keeps it once.
func dialectURL(base, path string) string {
	base = strings.TrimSuffix(base, "/")
	if strings.HasSuffix(base, "/v1") {
		path = strings.TrimPrefix(path, "/v1")
	}
	return base + path
}

// sseEvent renders a whole server-sent event: an "event:" line when name is
// set, and data on one line.
func sseEvent(name, data string) []byte {
	if name == "" {
		return []byte("data: " + data + "\n\n")
	}
	return []byte("event: " + name + "\ndata: " + data + "\n\n")
}
