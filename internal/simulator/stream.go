package simulator

import (
	"net/http"
	"strconv"
	"time"
)

// midStreamError is what OpenAI sends when it fails after the 200.
const midStreamError = `data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}` + "\n\n"

// garbledChunk is an event whose data is a chunk cut short: not JSON.
const garbledChunk = `data: {"id":"chatcmpl-garbled","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + "\n\n"

// streamer writes one SSE response. It lives for one call.
type streamer struct {
	c     *call
	rc    *http.ResponseController
	buf   []byte // reused for every event
	head  []byte // `data: {"id":…,"choices":[`, the same in every chunk
	usage bool   // stream_options.include_usage
	first bool   // no event sent yet: ChunkDelay goes between events
	// bedrock frames each event as Bedrock does (sendBedrock), from
	// started on.
	bedrock bool
	started time.Time
}

// stream answers a chat completion as SSE: a role chunk, one chunk per word,
// a finish chunk, the usage chunk when asked for, then [DONE]. It returns
// early when the client goes away, and misbehaves as Behavior says.
func (c *call) stream(req *chatRequest, a answer) {
	st := c.startStream()
	st.usage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	st.head = append(st.head, `data: {"id":"chatcmpl-`...)
	st.head = c.sim.appendID(st.head, 29)
	st.head = append(st.head, `","object":"chat.completion.chunk","created":`...)
	st.head = strconv.AppendInt(st.head, time.Now().Unix(), 10)
	st.head = append(st.head, `,"model":`...)
	st.head = appendString(st.head, req.Model)
	st.head = append(st.head, `,"service_tier":"default","system_fingerprint":null,"choices":[`...)

	if !st.chunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, "", "") {
		return
	}
	x := a.seed
	for i := 1; i <= a.completion; i++ {
		// Words after the first carry their leading space, as real tokens
		// do, so the deltas concatenate to the JSON answer's content.
		pre := `{"index":0,"delta":{"content":" `
		if i == 1 {
			pre = `{"index":0,"delta":{"content":"`
		}
		word := nextWord(&x)
		if i == 1 && c.b.EchoAuth {
			word = string(appendStringContent([]byte(word+" "), c.r.Header.Get("Authorization")))
		}
		if !st.chunk(pre, word, `"},"logprobs":null,"finish_reason":null}`) || !st.misbehave(i, a.completion, garbledChunk, midStreamError) {
			return
		}
	}
	if !st.chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"`, a.finish, `"}`) {
		return
	}
	if st.usage {
		st.buf = append(st.buf[:0], st.head...)
		st.buf = append(st.buf, `],"usage":`...)
		st.buf = appendUsage(st.buf, a)
		st.buf = append(st.buf, "}\n\n"...)
		if !st.send() {
			return
		}
	}
	st.raw("data: [DONE]\n\n")
}

// startStream sends the headers of an SSE response and returns its writer.
func (c *call) startStream() *streamer {
	st := &streamer{c: c, rc: http.NewResponseController(c.w), buf: make([]byte, 0, 512), first: true,
		bedrock: c.ep.bedrock(), started: time.Now()}
	if st.bedrock {
		c.header("application/vnd.amazon.eventstream")
	} else {
		h := c.header("text/event-stream; charset=utf-8")
		h["Cache-Control"] = []string{"no-cache"}
	}
	c.writeHeader(http.StatusOK)
	return st
}

// misbehave does what Behavior says after content event i of n: garbled is
// the protocol's event cut short, failure its mid-stream error event. It
// returns false when the stream ended.
func (st *streamer) misbehave(i, n int, garbled, failure string) bool {
	b := st.c.b
	if triggers(b.GarbleAfter, i, n) && !st.raw(garbled) {
		return false
	}
	switch {
	case triggers(b.CutAfter, i, n):
		st.c.cut()
		return false
	case triggers(b.ErrorAfter, i, n):
		st.raw(failure)
		return false
	case triggers(b.StallAfter, i, n):
		st.stall()
		return false
	}
	return true
}

// begin starts a named event (`event: name`, then its data) in buf; the
// caller appends the JSON and sends it with end.
func (st *streamer) begin(name string) {
	st.buf = append(st.buf[:0], "event: "...)
	st.buf = append(st.buf, name...)
	st.buf = append(st.buf, "\ndata: "...)
}

// end finishes and sends the event begun with begin.
func (st *streamer) end() bool {
	st.buf = append(st.buf, "\n\n"...)
	return st.send()
}

// triggers reports whether a misbehaviour set to after fires at content
// event i of n.
func triggers(after, i, n int) bool {
	return after > 0 && (i == after || (i == n && after > n))
}

// chunk sends one chunk whose only choice is pre+mid+post (in parts, so a
// word is never concatenated into a new string).
func (st *streamer) chunk(pre, mid, post string) bool {
	st.buf = append(st.buf[:0], st.head...)
	st.buf = append(st.buf, pre...)
	st.buf = append(st.buf, mid...)
	st.buf = append(st.buf, post...)
	st.buf = append(st.buf, ']')
	if st.usage {
		st.buf = append(st.buf, `,"usage":null`...)
	}
	st.buf = append(st.buf, "}\n\n"...)
	return st.send()
}

// raw sends a literal event.
func (st *streamer) raw(event string) bool {
	st.buf = append(st.buf[:0], event...)
	return st.send()
}

// send waits ChunkDelay (not before the first event), writes buf and flushes
// it, so every event reaches the client on its own as a provider's do. It
// returns false when the request must end.
func (st *streamer) send() bool {
	if !st.first && !st.c.wait(st.c.b.ChunkDelay) {
		return false
	}
	st.first = false
	if st.bedrock {
		return st.sendBedrock()
	}
	return st.write()
}

// write writes buf and flushes it.
func (st *streamer) write() bool {
	if _, err := st.c.w.Write(st.buf); err != nil {
		st.c.cancelled()
		return false
	}
	if err := st.rc.Flush(); err != nil {
		st.c.cancelled()
		return false
	}
	return true
}

// stall holds the connection until the client leaves or the simulator
// closes.
func (st *streamer) stall() {
	select {
	case <-st.c.r.Context().Done():
		st.c.cancelled()
	case <-st.c.sim.closing:
		st.c.cut()
	}
}
