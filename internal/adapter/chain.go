package adapter

import (
	"errors"
	"slices"

	"github.com/sluicehq/sluice"
)

// Hub is the protocol every other one has translators to and from, so that
// any two protocols meet through it: OpenAI chat, the one whose fields the
// others share most (docs/translators.md).
const Hub = sluice.ProtocolOpenAIChat

// Chain is a Translator for a caller of one protocol on an upstream of
// another when neither is the hub: two translators that meet at the hub.
// In carries the caller to the hub (the translator of a caller of that
// protocol on a hub upstream), Out carries the hub to the upstream (the
// translator of a hub caller on that upstream). What either loses or
// refuses, the chain does: it is as faithful as its worse half.
//
// A request goes through In then Out; an answer, an error and each stream
// event through Out then In. Between the two the hub request is a chat
// caller's request as Out expects one: protocol chat, In's body, the
// caller's stream flag, and usage asked for on a stream (every translator
// to the hub asks for it, since Sluice counts on it). The hub stream never
// reaches anyone: each hub event Out emits is fed to In as it is made, and
// In's events go to the caller.
//
// What it drops is what In drops and what Out drops of the caller's
// fields, named as the caller names them (Dropped).
//
// One value per execution; not safe for concurrent use.
type Chain struct {
	In, Out Translator

	hub     sluice.Request    // the request Out reads
	dropped []string          // In's, then the caller's names of Out's
	emit    func(Event) error // the caller's, during one Event
	relay   func(Event) error // c.toIn, bound once so that Event allocates no closure
}

var _ Translator = (*Chain)(nil)

// NewChain returns the translator of one execution made of in (caller to
// hub) and out (hub to upstream).
func NewChain(in, out Translator) *Chain {
	c := &Chain{In: in, Out: out}
	c.relay = c.toIn
	return c
}

// Request returns the upstream body: the caller's request carried to the
// hub by In, then to the upstream by Out. A request In refuses says that
// the model is reached through the hub, since In names the hub as the
// upstream that cannot express it.
func (c *Chain) Request(req *sluice.Request, model string) ([]byte, error) {
	body, err := c.In.Request(req, model)
	if err != nil {
		if e, ok := errors.AsType[*sluice.Error](err); ok {
			e.Msg += " (Sluice reaches this model's upstream through OpenAI chat)"
		}
		return nil, err
	}
	c.hub = *req
	c.hub.Protocol = Hub
	c.hub.Body = body
	c.hub.IncludeUsage = req.Stream
	if body, err = c.Out.Request(&c.hub, model); err != nil {
		return nil, err
	}
	c.dropped = c.In.Dropped()
	if out := c.Out.Dropped(); out != nil {
		c.dropped = slices.Clip(c.dropped) // In's list is its own
		c.dropped = c.callerNames(req.Body, out)
	}
	return body, nil
}

// callerNames returns c.dropped with the caller's names of the hub fields
// Out dropped (In's Origin) appended, but for those the caller did not
// send — hub fields In filled on its own — and those already named.
func (c *Chain) callerNames(caller []byte, out []string) []string {
	named := c.dropped
	o, ok := c.In.(origins)
	for _, hub := range out {
		name := hub
		switch {
		case ok:
			name = o.Origin(hub)
		case !Sent(caller, hub):
			name = ""
		}
		if name != "" && !slices.Contains(named, name) {
			named = append(named, name)
		}
	}
	return named
}

// Response returns the caller's answer for the upstream's whole answer.
func (c *Chain) Response(body []byte) ([]byte, error) {
	hub, err := c.Out.Response(body)
	if err != nil {
		return nil, err
	}
	return c.In.Response(hub)
}

// Event translates one upstream event: Out turns it into hub events, each
// of which In turns into the caller's. An error either returns (a stream
// error passed on, an event it cannot read) ends the stream; the caller
// has had In's error event by then when the upstream sent one.
func (c *Chain) Event(ev Event, emit func(Event) error) error {
	c.emit = emit
	err := c.Out.Event(ev, c.relay)
	c.emit = nil
	return err
}

func (c *Chain) toIn(ev Event) error { return c.In.Event(ev, c.emit) }

// Error returns the caller's error body: the upstream's error in the
// hub's envelope (Out), then in the caller's (In).
func (c *Chain) Error(status int, body []byte) []byte {
	return c.In.Error(status, c.Out.Error(status, body))
}

// Dropped names the caller's fields either half left out (see Chain).
func (c *Chain) Dropped() []string { return c.dropped }

// DroppedTools names the tools of the caller's request that In left out
// of the upstream request (a Responses caller's built-in tools: see
// openai.FromResponses), for the header that tells the caller.
func (c *Chain) DroppedTools() []string {
	if d, ok := c.In.(interface{ DroppedTools() []string }); ok {
		return d.DroppedTools()
	}
	return nil
}
