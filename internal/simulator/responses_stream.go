package simulator

import (
	"strconv"
	"time"
)

// responsesGarbled is a text delta cut short: not JSON.
const responsesGarbled = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_garbled\",\"output_index\":0,\"content_index\":0,\"delta\":\"\n\n"

// responsesStream writes one Responses stream. Every event carries the next
// sequence_number; content events, which the stream misbehaviours count,
// are its text and function-call argument deltas.
type responsesStream struct {
	*streamer
	rs          *response
	seq         int
	sent, total int
	// after is the sequence number after which events are sent (-1: all);
	// replay is set when the response is already stored (a GET with
	// stream=true streams it again).
	after  int
	replay bool
}

// responsesStream answers a Responses request as SSE: response.created and
// response.in_progress, each output item (added, its content, done), then
// response.completed (or response.incomplete) with the usage.
func (c *call) responsesStream(rs *response) {
	c.streamResponse(&responsesStream{rs: rs, after: -1})
}

// streamResponse sends the events of st.rs that follow st.after, storing
// the response at its end unless st.replay.
func (c *call) streamResponse(st *responsesStream) {
	rs := st.rs
	st.streamer = c.startStream()
	if rs.r.tool != nil {
		st.total = (len(rs.r.tool.args) + argsPiece - 1) / argsPiece
	} else {
		st.total = countDeltas(rs.text)
	}
	for _, name := range []string{"response.created", "response.in_progress"} {
		st.open(name)
		st.buf = append(st.buf, `"response":`...)
		st.buf = append(rs.appendObject(st.buf, "in_progress"), ',')
		if !st.close() {
			return
		}
	}
	for i, kind := range rs.kinds {
		if !st.item(i, false) || !st.content(i, kind) || !st.item(i, true) {
			return
		}
	}
	if !st.replay {
		rs.complete = time.Now().Unix()
		c.store(rs)
	}
	final := rs.appendObject(nil, rs.status())
	name := "response.completed"
	if rs.status() == "incomplete" {
		name = "response.incomplete"
	}
	st.open(name)
	st.buf = append(st.buf, `"response":`...)
	st.buf = append(st.buf, final...)
	st.buf = append(st.buf, ',')
	st.close()
}

// open begins event name: its JSON up to the first field.
func (st *responsesStream) open(name string) {
	st.begin(name)
	st.buf = append(st.buf, `{"type":"`...)
	st.buf = append(st.buf, name...)
	st.buf = append(st.buf, `",`...)
}

// close appends the sequence number and sends the event, unless it is not
// after st.after.
func (st *responsesStream) close() bool {
	st.buf = append(st.buf, `"sequence_number":`...)
	st.buf = strconv.AppendInt(st.buf, int64(st.seq), 10)
	st.seq++
	if st.seq-1 <= st.after {
		return true
	}
	st.buf = append(st.buf, '}')
	return st.end()
}

// item sends response.output_item.added or .done for output item i.
func (st *responsesStream) item(i int, done bool) bool {
	if done {
		st.open("response.output_item.done")
	} else {
		st.open("response.output_item.added")
	}
	st.buf = append(st.buf, `"output_index":`...)
	st.buf = strconv.AppendInt(st.buf, int64(i), 10)
	st.buf = append(st.buf, `,"item":`...)
	st.buf = st.rs.appendItem(st.buf, i, done)
	st.buf = append(st.buf, ',')
	return st.close()
}

// ref appends the item_id and output_index of a message or function call.
func (st *responsesStream) ref(i int) {
	st.buf = append(st.buf, `"item_id":"`...)
	st.buf = append(st.buf, st.rs.itemIDs[1]...) // the message or function call: reasoning has no content events
	st.buf = append(st.buf, `","output_index":`...)
	st.buf = strconv.AppendInt(st.buf, int64(i), 10)
	st.buf = append(st.buf, ',')
}

// content sends the events between an item's added and done: a message's
// content part and text deltas, or a function call's argument deltas. A
// reasoning item has none (no summary was asked for).
func (st *responsesStream) content(i, kind int) bool {
	rs := st.rs
	switch kind {
	case itemFunctionCall:
		for args := string(rs.r.tool.args); len(args) > 0; {
			n := min(argsPiece, len(args))
			st.open("response.function_call_arguments.delta")
			st.ref(i)
			st.buf = append(st.buf, `"delta":`...)
			st.buf = appendString(st.buf, args[:n])
			st.buf = append(st.buf, ',')
			if !st.close() || !st.contentSent() {
				return false
			}
			args = args[n:]
		}
		st.open("response.function_call_arguments.done")
		st.ref(i)
		st.buf = append(st.buf, `"name":`...)
		st.buf = appendString(st.buf, rs.r.tool.name)
		st.buf = append(st.buf, `,"arguments":`...)
		st.buf = appendString(st.buf, string(rs.r.tool.args))
		st.buf = append(st.buf, ',')
		return st.close()
	case itemMessage:
		if !st.part(i, "response.content_part.added", "") {
			return false
		}
		for rest := rs.text; len(rest) > 0; {
			var piece string
			piece, rest = nextDelta(rest)
			st.open("response.output_text.delta")
			st.ref(i)
			st.buf = append(st.buf, `"content_index":0,"delta":`...)
			st.buf = appendString(st.buf, piece)
			st.buf = append(st.buf, `,"logprobs":[],`...)
			if !st.close() || !st.contentSent() {
				return false
			}
		}
		st.open("response.output_text.done")
		st.ref(i)
		st.buf = append(st.buf, `"content_index":0,"text":`...)
		st.buf = appendString(st.buf, rs.text)
		st.buf = append(st.buf, `,"logprobs":[],`...)
		return st.close() && st.part(i, "response.content_part.done", rs.text)
	}
	return true
}

// part sends content_part.added (empty text) or .done.
func (st *responsesStream) part(i int, name, text string) bool {
	st.open(name)
	st.ref(i)
	st.buf = append(st.buf, `"content_index":0,"part":`...)
	st.buf = st.rs.appendPart(st.buf, text)
	st.buf = append(st.buf, ',')
	return st.close()
}

// contentSent counts a content event and misbehaves as due. The error
// event is built only when it is sent: it carries the sequence number.
func (st *responsesStream) contentSent() bool {
	st.sent++
	failure := ""
	if triggers(st.c.b.ErrorAfter, st.sent, st.total) {
		failure = `event: error` + "\n" + `data: {"type":"error","code":"server_error","message":"The server had an error while processing your request. Sorry about that!","param":null,"sequence_number":` +
			strconv.Itoa(st.seq) + "}\n\n"
	}
	return st.misbehave(st.sent, st.total, responsesGarbled, failure)
}
