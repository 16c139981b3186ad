package simulator

import (
	"strconv"
	"time"
)

// anthropicStreamError is the event: error Anthropic sends when it fails
// after the 200, typically an overload that would have been a 529.
const anthropicStreamError = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"

// anthropicGarbled is a text delta cut short: not JSON.
const anthropicGarbled = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\n\n"

// pingEvery is how many content deltas go between two pings; the first
// ping follows the first content_block_start, as Anthropic's does.
const pingEvery = 8

// anthropicStream writes one Messages stream. Content events, which the
// stream misbehaviours count, are its content_block_delta events.
type anthropicStream struct {
	*streamer
	sent, total int // content events sent, and in all
}

// messagesStream answers a Messages request as SSE: message_start, a
// thinking block when enabled, a text or tool_use block, message_delta with
// the stop reason and usage, message_stop.
func (c *call) messagesStream(req *messagesRequest, r *reply, text string, id []byte) {
	as := &anthropicStream{streamer: c.startStream()}
	if r.thinking > 0 {
		as.total += r.thinking + 1 // and the signature
	}
	switch {
	case r.tool != nil:
		as.total += 1 + (len(r.tool.args)+argsPiece-1)/argsPiece
	default:
		as.total += countDeltas(text)
	}
	u := req.usage(r)
	start := u
	start.output = 1

	as.begin("message_start")
	as.buf = append(as.buf, `{"type":"message_start","message":{"id":"`...)
	as.buf = append(as.buf, id...)
	as.buf = append(as.buf, `","type":"message","role":"assistant","model":`...)
	as.buf = appendString(as.buf, req.Model)
	as.buf = append(as.buf, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	as.buf = appendAnthropicUsage(as.buf, start)
	as.buf = append(as.buf, "}}"...)
	if !as.end() {
		return
	}

	index := 0
	if r.thinking > 0 {
		if !as.blockStart(index, `{"type":"thinking","thinking":"","signature":""}`) {
			return
		}
		for rest := string(appendWords(nil, r.thinkingSeed(), r.thinking)); len(rest) > 0; {
			var piece string
			piece, rest = nextDelta(rest)
			if !as.delta(index, "thinking_delta", "thinking", piece) {
				return
			}
		}
		if !as.delta(index, "signature_delta", "signature", string(r.signature())) || !as.blockStop(index) {
			return
		}
		index++
	}
	switch {
	case r.tool != nil:
		block := `{"type":"tool_use","id":"` + string(c.sim.appendID([]byte("toolu_01"), 22)) + `","name":` +
			string(appendString(nil, r.tool.name)) + `,"input":{}}`
		if !as.blockStart(index, block) || !as.delta(index, "input_json_delta", "partial_json", "") {
			return
		}
		for args := string(r.tool.args); len(args) > 0; {
			n := min(argsPiece, len(args))
			if !as.delta(index, "input_json_delta", "partial_json", args[:n]) {
				return
			}
			args = args[n:]
		}
		if !as.blockStop(index) {
			return
		}
	case len(text) > 0:
		if !as.blockStart(index, `{"type":"text","text":""}`) {
			return
		}
		for rest := text; len(rest) > 0; {
			var piece string
			piece, rest = nextDelta(rest)
			if !as.delta(index, "text_delta", "text", piece) {
				return
			}
		}
		if !as.blockStop(index) {
			return
		}
	}

	as.begin("message_delta")
	as.buf = append(as.buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
	as.buf = append(as.buf, r.stopReason()...)
	as.buf = append(as.buf, `","stop_sequence":null},"usage":`...)
	as.buf = appendAnthropicUsage(as.buf, u)
	as.buf = append(as.buf, '}')
	if !as.end() {
		return
	}
	as.begin("message_stop")
	as.buf = append(as.buf, `{"type":"message_stop"`...)
	if as.bedrock {
		as.buf = appendInvocationMetrics(as.buf, u, time.Since(as.started))
	}
	as.buf = append(as.buf, '}')
	as.end()
}

func (as *anthropicStream) blockStart(index int, block string) bool {
	as.begin("content_block_start")
	as.buf = append(as.buf, `{"type":"content_block_start","index":`...)
	as.buf = strconv.AppendInt(as.buf, int64(index), 10)
	as.buf = append(as.buf, `,"content_block":`...)
	as.buf = append(as.buf, block...)
	as.buf = append(as.buf, '}')
	if !as.end() {
		return false
	}
	return index > 0 || as.ping()
}

// delta sends a content_block_delta whose delta is {"type":typ, field:value},
// then misbehaves or pings as due.
func (as *anthropicStream) delta(index int, typ, field, value string) bool {
	as.begin("content_block_delta")
	as.buf = append(as.buf, `{"type":"content_block_delta","index":`...)
	as.buf = strconv.AppendInt(as.buf, int64(index), 10)
	as.buf = append(as.buf, `,"delta":{"type":"`...)
	as.buf = append(as.buf, typ...)
	as.buf = append(as.buf, `","`...)
	as.buf = append(as.buf, field...)
	as.buf = append(as.buf, `":`...)
	as.buf = appendString(as.buf, value)
	as.buf = append(as.buf, "}}"...)
	if !as.end() {
		return false
	}
	as.sent++
	if !as.misbehave(as.sent, as.total, anthropicGarbled, anthropicStreamError) {
		return false
	}
	return as.sent%pingEvery != 0 || as.ping()
}

func (as *anthropicStream) blockStop(index int) bool {
	as.begin("content_block_stop")
	as.buf = append(as.buf, `{"type":"content_block_stop","index":`...)
	as.buf = strconv.AppendInt(as.buf, int64(index), 10)
	as.buf = append(as.buf, '}')
	return as.end()
}

func (as *anthropicStream) ping() bool {
	return as.raw("event: ping\ndata: {\"type\":\"ping\"}\n\n")
}
