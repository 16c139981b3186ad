package simulator

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenAI Responses: POST /v1/responses (JSON and SSE), POST
// /v1/responses/compact, GET and DELETE /v1/responses/{id}, POST
// /v1/responses/{id}/cancel, and the same under /backend-api/codex (the
// ChatGPT backend Codex uses, with the rules of chatgpt.go).
// A response is stored for the key that created it unless store is false;
// previous_response_id and the follow-ups find it only with that key, and
// answer 404 otherwise, as a provider does for another organization.

// codexPrefix is the ChatGPT backend's path prefix.
const codexPrefix = "/backend-api/codex"

func routeResponses(r *http.Request) endpoint {
	p := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, codexPrefix), "/v1")
	rest, ok := strings.CutPrefix(p, "/responses")
	switch {
	case !ok:
	case rest == "" && r.Method == http.MethodPost:
		return epResponses
	case rest == "/compact" && r.Method == http.MethodPost:
		return epCompact
	case strings.HasPrefix(rest, "/"):
		id, cancel := strings.CutSuffix(rest[1:], "/cancel")
		switch {
		case id == "" || strings.Contains(id, "/"):
		case cancel && r.Method == http.MethodPost:
			return epResponseCancel
		case !cancel && r.Method == http.MethodGet:
			return epResponseGet
		case !cancel && r.Method == http.MethodDelete:
			return epResponseDelete
		}
	}
	return epNone
}

// codex reports a request to the ChatGPT backend path.
func (c *call) codex() bool { return strings.HasPrefix(c.r.URL.Path, codexPrefix) }

// responsesRequest is the part of a Responses request the simulator uses.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	Stream             bool            `json:"stream"`
	Background         bool            `json:"background"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Include        []string        `json:"include"`
	PromptCacheKey string          `json:"prompt_cache_key"`
	Metadata       json.RawMessage `json:"metadata"`
}

// inputItem is the part of an input item the simulator reads.
type inputItem struct {
	Type      string          `json:"type"` // "" for an EasyInputMessage
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Arguments string          `json:"arguments"` // function_call
	Output    json.RawMessage `json:"output"`    // function_call_output
}

func (c *call) parseResponses(body []byte) parsed {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{err: decodeError(err)}
	}
	p := parsed{model: req.Model, stream: req.Stream, resp: &req}
	switch {
	case req.Model == "":
		p.err = missingModel
	case req.Input == nil && req.PreviousResponseID == "":
		p.err = invalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter")
	case req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1:
		p.err = belowMinimum("max_output_tokens", *req.MaxOutputTokens)
	case req.Background && !req.stores():
		p.err = invalidRequest("Background mode requires store=true.", "background", "")
	case c.codex():
		p.err = c.chatgptRefusal(&req, body)
	}
	return p
}

// stores reports whether the response is kept for follow-ups (store
// defaults to true).
func (req *responsesRequest) stores() bool { return req.Store == nil || *req.Store }

// reply answers a Responses request chained onto prev (nil for none), and
// returns the cached input tokens: prev's whole conversation, else half the
// prompt (at least 1) when the request sets prompt_cache_key.
func (req *responsesRequest) reply(prev *storedResponse, track bool) (reply, int) {
	cv, cached := newConvo(), 0
	if prev != nil {
		cv, cached = convo{seed: prev.seed, prompt: prev.context}, prev.context
	}
	cv.track = track
	var instructions string
	if json.Unmarshal(req.Instructions, &instructions) == nil && instructions != "" {
		cv.message("system")
		cv.text(instructions)
	}
	asked := false
	var items []inputItem
	var text string
	switch {
	case json.Unmarshal(req.Input, &text) == nil:
		cv.message("user")
		cv.text(text)
		asked = askedForTool(text)
	case json.Unmarshal(req.Input, &items) == nil:
		for i, it := range items {
			switch it.Type {
			case "", "message":
				cv.message(it.Role)
				last := i == len(items)-1 && it.Role == "user"
				forEachText(it.Content, func(s string) {
					cv.text(s)
					asked = asked || (last && askedForTool(s))
				})
			case "function_call":
				cv.message("assistant")
				cv.text(it.Arguments)
			case "function_call_output":
				cv.message("tool")
				forEachText(it.Output, cv.text)
			}
		}
	}
	r := replyFor(cv, req.MaxOutputTokens)
	if req.Reasoning != nil && req.Reasoning.Effort != "none" {
		r.thinking = thinkingWords
	}
	var tools []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	_ = json.Unmarshal(req.Tools, &tools) // absent or not a list: no tools
	var defs []toolDef
	for _, t := range tools {
		if t.Type == "function" {
			defs = append(defs, toolDef{t.Name, t.Parameters})
		}
	}
	choice, named := "auto", ""
	var tc struct{ Type, Name string }
	switch {
	case json.Unmarshal(req.ToolChoice, &choice) == nil:
	case json.Unmarshal(req.ToolChoice, &tc) == nil && tc.Type == "function":
		named = tc.Name
	}
	r.tool = chooseTool(defs, choice, named, asked, r.seed)
	if prev == nil && req.PromptCacheKey != "" && !track { // without a modelled cache, a hint of one
		cached = max(r.prompt/2, 1)
	}
	return r, cached
}

// storedResponse is a response kept for previous_response_id and the
// follow-ups.
type storedResponse struct {
	key     string    // the credential that created it
	rs      *response // read-only once stored
	seed    uint64    // of the conversation including this response's output
	context int       // tokens of that conversation
	// A background response is queued for the first quarter of its run
	// (Behavior.JobDuration), then in progress until done, unless
	// cancelled before.
	queuedUntil, done time.Time
	cancelled         atomic.Bool
}

// status is the stored response's status at now.
func (st *storedResponse) status(now time.Time) string {
	switch {
	case st.cancelled.Load():
		return "cancelled"
	case now.Before(st.queuedUntil):
		return "queued"
	case now.Before(st.done):
		return "in_progress"
	}
	return st.rs.status()
}

// maxStoredResponses bounds the store; the oldest responses go first, as
// they expire upstream.
const maxStoredResponses = 10000

// responseStore keeps responses by id. Safe for concurrent use.
type responseStore struct {
	mu    sync.Mutex
	byID  map[string]*storedResponse
	order []string // ids, oldest first
}

func (rs *responseStore) init() { rs.byID = make(map[string]*storedResponse) }

func (rs *responseStore) put(id string, r *storedResponse) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.order) >= maxStoredResponses {
		delete(rs.byID, rs.order[0])
		rs.order = rs.order[1:]
	}
	rs.byID[id] = r
	rs.order = append(rs.order, id)
}

// load returns the response id created with key, or nil.
func (rs *responseStore) load(id, key string) *storedResponse {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.byID[id]; r != nil && r.key == key {
		return r
	}
	return nil
}

func (rs *responseStore) delete(id string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.byID, id) // its id leaves order when it would be evicted
}

// previous returns the response a request chains onto (nil for none); when
// the key has no such response it answers 404 and returns false.
func (c *call) previous(req *responsesRequest) (*storedResponse, bool) {
	if req.PreviousResponseID == "" {
		return nil, true
	}
	prev := c.sim.stored.load(req.PreviousResponseID, c.rec.Key)
	if prev == nil {
		c.fail(http.StatusNotFound, openAIError("Previous response with id '"+req.PreviousResponseID+"' not found.",
			"invalid_request_error", "previous_response_id", "previous_response_not_found"))
		return nil, false
	}
	return prev, true
}

// response is one Responses answer being rendered.
type response struct {
	req      *responsesRequest
	r        reply
	text     string
	cached   int
	id       string
	kinds    []int     // of the output items, in order
	itemIDs  [3]string // reasoning, message or function call, call_id
	created  int64
	complete int64 // completed_at
}

func (c *call) newResponse(req *responsesRequest, prev *storedResponse) *response {
	rs := &response{req: req, created: time.Now().Unix()}
	rs.r, rs.cached = req.reply(prev, c.tracks())
	if c.promptCached(&rs.r.answer); rs.r.modelled {
		rs.cached = max(rs.cached, rs.r.cached)
	}
	rs.text = c.text(&rs.r)
	rs.id = string(c.sim.appendID([]byte("resp_"), 40))
	rs.itemIDs = [3]string{string(c.sim.appendID([]byte("rs_"), 40)), string(c.sim.appendID([]byte("msg_"), 40)), string(c.sim.appendID([]byte("call_"), 24))}
	if rs.r.tool != nil {
		rs.itemIDs[1] = "fc_" + rs.itemIDs[1][len("msg_"):]
	}
	rs.kinds = rs.items()
	return rs
}

// status is the response's final status.
func (rs *response) status() string {
	if rs.r.tool == nil && rs.r.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// appendObject appends the response object with status: with output and
// usage when it is finished (completed or incomplete); else without, as the
// first events of a stream and an unfinished background response show it.
func (rs *response) appendObject(b []byte, status string) []byte {
	req := rs.req
	done := status == "completed" || status == "incomplete"
	b = append(b, `{"id":"`...)
	b = append(b, rs.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, rs.created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":`...)
	b = strconv.AppendBool(b, req.Background)
	b = append(b, `,"completed_at":`...)
	if done {
		b = strconv.AppendInt(b, rs.complete, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"error":null,"incomplete_details":`...)
	if status == "incomplete" {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	b = appendRaw(b, req.Instructions, "null")
	b = append(b, `,"max_output_tokens":`...)
	if req.MaxOutputTokens != nil {
		b = strconv.AppendInt(b, int64(*req.MaxOutputTokens), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"output":[`...)
	if done {
		for i := range rs.kinds {
			if i > 0 {
				b = append(b, ',')
			}
			b = rs.appendItem(b, i, true)
		}
	}
	b = append(b, `],"parallel_tool_calls":true,"previous_response_id":`...)
	if req.PreviousResponseID != "" {
		b = appendString(b, req.PreviousResponseID)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"reasoning":{"effort":`...)
	if req.Reasoning != nil && req.Reasoning.Effort != "" {
		b = appendString(b, req.Reasoning.Effort)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"summary":null},"store":`...)
	b = strconv.AppendBool(b, req.stores())
	b = append(b, `,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":`...)
	b = appendRaw(b, req.ToolChoice, `"auto"`)
	b = append(b, `,"tools":`...)
	b = appendRaw(b, req.Tools, "[]")
	b = append(b, `,"top_p":1.0,"truncation":"disabled","usage":`...)
	if done {
		b = rs.appendUsage(b)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"metadata":`...)
	b = appendRaw(b, req.Metadata, "{}")
	return append(b, '}')
}

func appendRaw(b []byte, raw json.RawMessage, absent string) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return append(b, absent...)
	}
	return append(b, raw...)
}

func (rs *response) appendUsage(b []byte) []byte {
	out := rs.r.output()
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.r.prompt), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.cached), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.r.thinking), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.r.prompt+out), 10)
	return append(b, '}')
}

// Output item kinds, in the order they are output.
const (
	itemReasoning = iota
	itemMessage
	itemFunctionCall
)

// items lists the kinds of the response's output items.
func (rs *response) items() []int {
	var kinds []int
	if rs.r.thinking > 0 {
		kinds = append(kinds, itemReasoning)
	}
	if rs.r.tool != nil {
		return append(kinds, itemFunctionCall)
	}
	return append(kinds, itemMessage)
}

// appendItem appends output item i: finished, or as
// response.output_item.added shows it.
func (rs *response) appendItem(b []byte, i int, done bool) []byte {
	switch rs.kinds[i] {
	case itemReasoning:
		b = append(b, `{"id":"`...)
		b = append(b, rs.itemIDs[0]...)
		b = append(b, `","type":"reasoning","summary":[]`...)
		if done && slices.Contains(rs.req.Include, "reasoning.encrypted_content") {
			b = append(b, `,"encrypted_content":"`...)
			b = append(b, opaque("gAAAAA", rs.r.thinkingSeed(), 64)...)
			b = append(b, '"')
		}
		return append(b, '}')
	case itemFunctionCall:
		b = append(b, `{"id":"`...)
		b = append(b, rs.itemIDs[1]...)
		b = append(b, `","type":"function_call","status":"`...)
		if done {
			b = append(b, `completed","arguments":`...)
			b = appendString(b, string(rs.r.tool.args))
		} else {
			b = append(b, `in_progress","arguments":""`...)
		}
		b = append(b, `,"call_id":"`...)
		b = append(b, rs.itemIDs[2]...)
		b = append(b, `","name":`...)
		b = appendString(b, rs.r.tool.name)
		return append(b, '}')
	}
	b = append(b, `{"id":"`...)
	b = append(b, rs.itemIDs[1]...)
	b = append(b, `","type":"message","status":"`...)
	if !done {
		return append(b, `in_progress","role":"assistant","content":[]}`...)
	}
	b = append(b, rs.status()...)
	b = append(b, `","role":"assistant","content":[`...)
	b = rs.appendPart(b, rs.text)
	return append(b, "]}"...)
}

// appendPart appends an output_text content part.
func (rs *response) appendPart(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = appendString(b, text)
	return append(b, '}')
}

// responses answers a valid Responses request.
func (c *call) responses(req *responsesRequest) {
	prev, ok := c.previous(req)
	if !ok {
		return
	}
	if c.b.Answer != "" {
		c.replaced()
		return
	}
	rs := c.newResponse(req, prev)
	if c.codex() {
		h := c.w.Header()
		h["X-Codex-Primary-Used-Percent"] = []string{"1"}
		h["X-Codex-Primary-Window-Minutes"] = []string{"300"}
	}
	if req.Stream {
		c.responsesStream(rs)
		return
	}
	if req.Background { // stored: parseResponses refuses background without store
		st := c.store(rs)
		c.respond(http.StatusOK, "application/json", rs.appendObject(nil, st.status(time.Now())))
		return
	}
	rs.complete = time.Now().Unix()
	c.store(rs)
	b := rs.appendObject(make([]byte, 0, 1024+len(rs.text)), rs.status())
	c.answerJSON(b, len(b)-1) // padding goes last
}

// store keeps a response for the key, unless the request said store false
// (then it returns nil). A background response runs from now; any other is
// finished.
func (c *call) store(rs *response) *storedResponse {
	if !rs.req.stores() {
		return nil
	}
	cv := convo{seed: rs.r.seed} // the seed goes on as if the answer were resent; tokens are counted as context
	cv.message("assistant")
	if rs.r.tool != nil {
		cv.text(string(rs.r.tool.args))
	} else {
		cv.text(rs.text)
	}
	st := &storedResponse{key: c.rec.Key, rs: rs, seed: cv.seed, context: rs.r.prompt + rs.r.output()}
	if rs.req.Background && !rs.req.Stream { // a streamed one is finished when stored
		now, d := time.Now(), cmp.Or(c.b.JobDuration, defaultJobDuration)
		st.queuedUntil, st.done = now.Add(d/4), now.Add(d)
		rs.complete = st.done.Unix()
	}
	c.sim.stored.put(rs.id, st)
	return st
}

// compactedTokens is the output of a compaction.
const compactedTokens = 8

// compact answers POST /v1/responses/compact: the conversation becomes one
// opaque compaction item.
func (c *call) compact(req *responsesRequest) {
	prev, ok := c.previous(req)
	if !ok {
		return
	}
	r, cached := req.reply(prev, c.tracks())
	if c.promptCached(&r.answer); r.modelled {
		cached = max(cached, r.cached)
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":"resp_`...)
	b = c.sim.appendID(b, 40)
	b = append(b, `","object":"response.compaction","created_at":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"output":[{"id":"cmp_`...)
	b = c.sim.appendID(b, 40)
	b = append(b, `","type":"compaction","encrypted_content":"`...)
	b = append(b, opaque("gAAAAA", r.seed, 64)...)
	b = append(b, `"}],"usage":`...)
	rs := &response{r: reply{answer: answer{prompt: r.prompt, completion: compactedTokens}}, cached: cached}
	b = rs.appendUsage(b)
	c.respond(http.StatusOK, "application/json", append(b, '}'))
}

// responseFollowUp answers GET, DELETE and cancel of a stored response.
// Only a background response can be cancelled; cancelling a finished one
// returns it as it is. A GET with stream=true streams the response's
// events again, those after the sequence number starting_after when it is
// given (the simulator streams a running background response whole, as if
// it had finished).
func (c *call) responseFollowUp(ep endpoint) {
	_, rest, _ := strings.Cut(c.r.URL.Path, "/responses/")
	id := strings.TrimSuffix(rest, "/cancel")
	stored := c.sim.stored.load(id, c.rec.Key)
	now := time.Now()
	switch {
	case stored == nil:
		c.fail(http.StatusNotFound, openAIError("Response with id '"+id+"' not found.", "invalid_request_error", "", ""))
	case ep == epResponseGet && c.r.URL.Query().Get("stream") == "true":
		after, err := strconv.Atoi(cmp.Or(c.r.URL.Query().Get("starting_after"), "-1"))
		if err != nil {
			c.fail(http.StatusBadRequest, openAIError("Invalid value for 'starting_after': an integer is required.", "invalid_request_error", "starting_after", ""))
			return
		}
		c.streamResponse(&responsesStream{rs: stored.rs, after: after, replay: true})
	case ep == epResponseDelete:
		c.sim.stored.delete(id)
		b := appendString([]byte(`{"id":`), id)
		c.respond(http.StatusOK, "application/json", append(b, `,"object":"response.deleted","deleted":true}`...))
	case ep == epResponseCancel && !stored.rs.req.Background:
		c.fail(http.StatusBadRequest, openAIError("Only responses created with background=true can be cancelled.", "invalid_request_error", "", ""))
	case ep == epResponseCancel && now.Before(stored.done):
		stored.cancelled.Store(true)
		fallthrough
	default:
		c.respond(http.StatusOK, "application/json", stored.rs.appendObject(nil, stored.status(now)))
	}
}
