package upstream

import (
	"io"
	"net/http"

	"github.com/sluicehq/sluice"
)

// Hosting is what a cloud changes of a wire protocol's dialect when it
// hosts the protocol (Azure OpenAI hosts OpenAI chat and embeddings,
// Vertex AI Gemini and Anthropic Messages, Bedrock Anthropic Messages,
// Google's Code Assist API Gemini, the ChatGPT backend OpenAI Responses):
// the body stays the provider's protocol, so the protocol's translators
// and passthrough serve it unchanged, and the host only changes how the
// request is addressed and presented. A nil field keeps the base
// dialect's.
//
// Hosted builds the dialect once, at start, from the base dialect and a
// Hosting; package app's hostTable says which cloud hosts which protocol
// with which dialect, and an edge whose endpoint has a Host (from its
// cloud block in the catalog: endpoints[].azure, .vertex, .bedrock,
// .code_assist or .chatgpt) is carried by the hosted dialect instead of
// the protocol's own (Protocols.dialect). A cloud that must change more
// (sign the whole request, reframe its stream) adds a field here, copied
// by Hosted, and the nil-checked call where the execution acts on it.
type Hosting struct {
	// URL is the whole URL of req to model on endpoint ep (its base URL
	// and Host settings at hand); "" for an operation the cloud does not
	// offer (a token count: Sluice then estimates it, as for a protocol
	// without one). It replaces the base dialect's Path, CountPath and
	// ModelPath.
	URL func(req *sluice.Request, ep *sluice.Endpoint, model string) string
	// Authorize and AuthorizeToken present a static secret and an OAuth
	// access token as the cloud takes them (see Dialect).
	Authorize      func(h, caller http.Header, secret string)
	AuthorizeToken func(h, caller http.Header, token string)
	// Finish adapts a body that is already in the wire protocol, prepared
	// for a passthrough or made by a translator, to the cloud's variant of
	// it for model on endpoint ep (Vertex's Anthropic takes its version in
	// the body and the model only in the URL; Bedrock's the caller's betas
	// too, from req.Header; Code Assist wraps the body with the model and
	// the endpoint's project).
	Finish func(req *sluice.Request, ep *sluice.Endpoint, model string, body []byte) ([]byte, error)
	// Answer reads a whole 2xx answer in the cloud's envelope as the
	// protocol's answer (Code Assist's {"response": …}), before usage, a
	// translator or the caller reads it: a part of body, or body. An answer
	// too long to hold (maxHeldAnswer) cannot be read so, and fails as one
	// too long to translate does.
	Answer func(body []byte) []byte
	// Sign signs the whole request once it is final (after Authorize and
	// the credential's headers; its body in memory) with credential cr for
	// endpoint ep: Bedrock's SigV4. It returns what else of the credential
	// went on the wire, which answers must not show ("" nothing).
	Sign func(r *http.Request, ep *sluice.Endpoint, cr *sluice.Credential) (shown string, err error)
	// Unframe reads a streamed answer that is not the protocol's
	// server-sent events (Bedrock's AWS event stream, Code Assist's events
	// in its envelope) as the protocol's, which the relay reads as it
	// reads any; it checks the answer's content type (h) in place of the
	// relay's check for text/event-stream.
	Unframe func(h http.Header, body io.Reader) (io.Reader, error)
	// Rejection rewrites an error answer in the cloud's envelope (status,
	// headers, body) as the protocol's, before it is classified and passed
	// on to the caller.
	Rejection func(status int, h http.Header, body []byte) (int, []byte)
	// Gather, for a cloud that answers only streams (the ChatGPT
	// backend), reads the stream that answers a caller who asked for a
	// whole answer to its end, and returns the JSON answer the protocol
	// gives unstreamed; the execution goes on with it as with any JSON
	// answer. The body asks for the stream (Finish). A failure event of
	// the stream is a *FailedEvent.
	Gather func(events io.Reader) ([]byte, error)
}

// Hosted returns base's dialect as hosting changes it.
func Hosted(base *Dialect, hosting Hosting) *Dialect {
	d := *base
	d.Pass = sluice.HeaderSet{}
	d.url = hosting.URL
	if hosting.Authorize != nil {
		d.Authorize = hosting.Authorize
		// A cloud that presents its secret its own way presents a token
		// by Authorize too, unless it says otherwise: the base's token
		// presentation is the provider's.
		d.AuthorizeToken = nil
	}
	if hosting.AuthorizeToken != nil {
		d.AuthorizeToken = hosting.AuthorizeToken
	}
	d.finish, d.answer, d.gather = hosting.Finish, hosting.Answer, hosting.Gather
	d.sign, d.unframe, d.rejection = hosting.Sign, hosting.Unframe, hosting.Rejection
	return &d
}

// HostedKey names a hosted dialect: the cloud (sluice.Host.Cloud) and the
// wire protocol it hosts.
type HostedKey struct {
	Cloud    string
	Protocol sluice.Protocol
}

// dialect is the dialect that carries requests to edge e: the hosted
// dialect of e's protocol on e's cloud, or the protocol's own. nil when
// there is none.
func (p *Protocols) dialect(e *sluice.Edge) *Dialect {
	if cloud := e.Endpoint.Host.Cloud; cloud != "" {
		return p.Hosted[HostedKey{cloud, e.Protocol}]
	}
	return p.Dialects[e.Protocol]
}

// target is the URL of req to model on endpoint ep; "" for a count or a
// compaction the dialect does not have.
func (d *Dialect) target(req *sluice.Request, ep *sluice.Endpoint, model string) string {
	if d.url != nil {
		return d.url(req, ep, model)
	}
	path := d.path(req, model)
	if path == "" {
		return ""
	}
	return dialectURL(ep.BaseURL, path)
}

// finishBody applies the host's Finish to a body in the wire protocol,
// for model on endpoint ep.
func (d *Dialect) finishBody(req *sluice.Request, ep *sluice.Endpoint, model string, body []byte) ([]byte, error) {
	if d.finish == nil {
		return body, nil
	}
	return d.finish(req, ep, model, body)
}

// reframed is a cloud's stream read as the protocol's server-sent events
// (a Hosting's Unframe): next appends the events made of the stream's next
// message to dst, and buffered says whether that message has arrived
// already. Events already made leave in one Read, so the relay writes them
// in one write as it does for any stream. An error, of reading or of
// making events, ends the stream: it is returned once the events made
// before it are read, and by every Read after.
type reframed struct {
	next     func(dst []byte) ([]byte, error)
	buffered func() bool
	out      []byte // the events made, out[off:] not yet read
	off      int
	err      error
}

func (r *reframed) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.off < len(r.out) {
			m := copy(p[n:], r.out[r.off:])
			n += m
			r.off += m
			continue
		}
		if r.err != nil || n > 0 && !r.buffered() {
			break // the error, or what was read: the next message has not arrived
		}
		r.out, r.err = r.next(r.out[:0])
		r.off = 0
	}
	if n == 0 && r.err != nil {
		return 0, r.err
	}
	return n, nil
}

// appendMember appends the member key (a JSON object's, as read: its
// quotes left out, its escapes kept) with its raw value, and a comma, to
// out: how a cloud's body is rebuilt member by member.
func appendMember(out, key, value []byte) []byte {
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, `":`...)
	out = append(out, value...)
	return append(out, ',')
}
