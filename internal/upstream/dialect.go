package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol"
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
	// CompactPath is the path of the protocol's compaction (Responses'),
	// "" when it has none.
	CompactPath string
	// ModelPath, for a protocol whose path names the model and what is
	// asked instead of its body (Gemini's
	// /v1beta/models/{model}:generateContent), is the path of req to the
	// upstream model, and is used instead of Path and CountPath; it
	// returns "" for a count when the protocol has none.
	ModelPath func(req *sluice.Request, model string) string
	// CountAnswer renders Sluice's own estimate of a count's tokens as the
	// protocol answers a count, for a caller of the protocol whose
	// upstream has none; nil for a protocol without a count.
	CountAnswer func(tokens int64) []byte
	// Authorize sets the credential's headers, and those of the caller's
	// (caller, read only) that the protocol passes on, on an upstream
	// request's header h.
	Authorize func(h, caller http.Header, secret string)
	// AuthorizeToken is Authorize for an OAuth access token (a
	// subscription account), where the protocol presents one otherwise
	// than a key; nil: as a key.
	AuthorizeToken func(h, caller http.Header, token string)
	// Prepare adapts the caller's body, of this protocol, to an edge's model.
	Prepare func(req *sluice.Request, model string) ([]byte, error)
	// Usage reads the raw value of an answer's top-level usage member
	// ("usage", Gemini's "usageMetadata"); Measured is false when it is
	// absent or unreadable. The protocol's package says how (UsageValue).
	Usage func(v []byte) sluice.Usage
	// Event reads one event of a stream, as the protocol's package reads
	// it (protocol.EventFunc says what it returns).
	Event protocol.EventFunc
	// Pass are the caller's headers passed on when the caller speaks the
	// dialect's protocol too (none when its request is translated), as
	// the protocol's package lists them (PassHeaders); an endpoint's
	// sluice.HeaderRules change them (see passOn). A cloud's dialect
	// (Hosted) has none: the cloud is not the provider's API (but the
	// ChatGPT backend, which Codex itself calls, keeps OpenAI's).
	Pass sluice.HeaderSet
	// Stores says that the upstream stores the responses it answers, for
	// follow-ups that name their id (Responses' previous_response_id): a
	// passthrough reads the id (Attempt.StoredID) from the answer or the
	// stream's response.created event.
	Stores bool

	// url and finish are a hosted dialect's (see Hosting): they are set
	// only by Hosted.
	url       func(req *sluice.Request, ep *sluice.Endpoint, model string) string
	finish    func(req *sluice.Request, ep *sluice.Endpoint, model string, body []byte) ([]byte, error)
	answer    func(body []byte) []byte
	sign      func(r *http.Request, ep *sluice.Endpoint, cr *sluice.Credential) (string, error)
	unframe   func(h http.Header, body io.Reader) (io.Reader, error)
	rejection func(status int, h http.Header, body []byte) (int, []byte)
	gather    func(events io.Reader) ([]byte, error)
}

// Ending is the caller side of a stream that cannot complete: the whole
// server-sent events, in the caller's protocol, that end a committed stream
// when the upstream's broke (Failed) or the gateway cut it when shutting
// down (Shutdown). They are built once: ending a stream allocates nothing.
type Ending struct {
	Failed, Shutdown []byte
}

// endingOf is the Ending of a protocol whose streams end with an event
// named event (none: unnamed) whose data is envelope's rendering of
// Sluice's error: the upstream's stream failed (rendered as a 500), or the
// gateway is shutting down (ErrShuttingDown, as a 503; its wait is the
// Retry-After of a new request, not this stream's).
func endingOf(event string, envelope func(e *sluice.Error, status int) []byte) *Ending {
	failed := &sluice.Error{Code: sluice.CodeUpstreamStreamFailed, Msg: "the upstream stream failed before it completed"}
	shutdown := &sluice.Error{Code: ErrShuttingDown.Code, Msg: ErrShuttingDown.Msg + "; the stream ended before it completed"}
	return &Ending{
		Failed:   sseEvent(event, envelope(failed, http.StatusInternalServerError)),
		Shutdown: sseEvent(event, envelope(shutdown, http.StatusServiceUnavailable)),
	}
}

// Pair is an execution whose caller speaks Caller and whose upstream speaks
// Upstream.
type Pair struct {
	Caller, Upstream sluice.Protocol
}

// Protocols is how a Caller speaks each protocol: the upstream side by the
// protocol an edge speaks (by the cloud and the protocol for an endpoint
// on a cloud: Hosted), the stream ending by the caller's protocol, and the
// translators of the pairs that differ. Built once (by app) and read only
// afterwards.
type Protocols struct {
	Dialects    map[sluice.Protocol]*Dialect
	Hosted      map[HostedKey]*Dialect
	Endings     map[sluice.Protocol]*Ending
	Translators map[Pair]func() adapter.Translator
}

// CanServe reports whether a caller of protocol caller can be served by an
// endpoint speaking upstream: the same protocol, or a pair Sluice has a
// translator for.
func (p *Protocols) CanServe(caller, upstream sluice.Protocol) bool {
	return caller == upstream || p.Translators[Pair{caller, upstream}] != nil && p.Dialects[upstream] != nil
}

// path is where req goes on an upstream of the dialect, for model: ""
// for a count or a compaction the protocol does not have.
func (d *Dialect) path(req *sluice.Request, model string) string {
	switch {
	case d.ModelPath != nil:
		return d.ModelPath(req, model)
	case req.CountTokens:
		return d.CountPath
	case req.Compact:
		return d.CompactPath
	}
	return d.Path
}

// dialectURL joins an endpoint's base URL and a dialect's path; a base URL
// that already ends in the path's version (/v1, Gemini's /v1beta) keeps it
// once.
func dialectURL(base, path string) string {
	base = strings.TrimSuffix(base, "/")
	for _, version := range [...]string{"/v1/", "/v1beta/"} {
		if strings.HasPrefix(path, version) && strings.HasSuffix(base, version[:len(version)-1]) {
			return base + path[len(version)-1:]
		}
	}
	return base + path
}

// sseEvent renders a whole server-sent event: an "event:" line when name is
// set, and data on one line.
func sseEvent(name string, data []byte) []byte {
	if name == "" {
		return []byte("data: " + string(data) + "\n\n")
	}
	return []byte("event: " + name + "\ndata: " + string(data) + "\n\n")
}

// errNoAccessToken is an OAuth credential without a valid access token: it
// is out of service until its token is refreshed, and nothing is sent.
var errNoAccessToken = errors.New("the credential has no valid OAuth access token")

// present sets credential cr on an upstream request's header h: the
// dialect's presentation of its static secret, or of its OAuth access
// token, then its static headers, which replace whatever was set under
// their names. It returns the secret sent, which answers must not show.
func (d *Dialect) present(h, caller http.Header, cr *sluice.Credential) (string, error) {
	if cr.Tokens == nil {
		d.Authorize(h, caller, cr.Secret)
		setHeaders(h, cr.Headers)
		return cr.Secret, nil
	}
	token, ok := cr.Tokens.Token()
	if !ok {
		return "", errNoAccessToken
	}
	d.presentToken(h, caller, cr, token)
	return token, nil
}

// presentToken sets an OAuth credential with its access token.
func (d *Dialect) presentToken(h, caller http.Header, cr *sluice.Credential, token string) {
	if d.AuthorizeToken != nil {
		d.AuthorizeToken(h, caller, token)
	} else {
		d.Authorize(h, caller, token)
	}
	setHeaders(h, cr.Headers)
}

// setHeaders sets a credential's static headers on h. Their values are
// shared by every request: the transport only reads them.
func setHeaders(h, static http.Header) {
	for name, v := range static {
		h[name] = v
	}
}

// send sends hreq to endpoint ep, presenting credential cr as dialect d
// does (see present; then signing the request when d signs), and returns
// the answer and the secret sent. A 401 to an OAuth
// access token makes the token source refresh it (once per refused token,
// for every replica: see sluice.TokenSource.Refused), and the request is
// sent again with the new token; a second 401 is an auth failure like any.
func (c *Caller) send(hreq *http.Request, d *Dialect, caller http.Header, cr *sluice.Credential, ep *sluice.Endpoint) (*http.Response, string, error) {
	connect := ep.Timeouts.Connect
	secret, err := d.present(hreq.Header, caller, cr)
	if err != nil {
		return nil, "", err
	}
	if d.sign != nil {
		shown, err := d.sign(hreq, ep, cr)
		if err != nil {
			return nil, "", fmt.Errorf("sign the request: %w", err)
		}
		if shown != "" {
			secret = shown
		}
	}
	resp, err := c.transport(connect).RoundTrip(hreq)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || cr.Tokens == nil {
		return resp, secret, err
	}
	body := io.ReadCloser(http.NoBody)
	switch {
	case hreq.GetBody != nil:
		if body, err = hreq.GetBody(); err != nil {
			return resp, secret, nil
		}
	case hreq.Body != nil && hreq.Body != http.NoBody:
		return resp, secret, nil // a body that cannot be sent twice
	}
	fresh, ok := cr.Tokens.Refused(hreq.Context(), secret)
	if !ok {
		body.Close()
		return resp, secret, nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	again := hreq.Clone(hreq.Context())
	again.Body = body
	d.presentToken(again.Header, caller, cr, fresh)
	resp, err = c.transport(connect).RoundTrip(again)
	return resp, fresh, err
}
