package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Anthropic Messages: POST /v1/messages (also ?beta=true, as Claude Code
// sends) and POST /v1/messages/count_tokens. The credential is x-api-key, or
// a Bearer token; anthropic-version is required; errors are Anthropic's
// envelope with the request-id header's id.

// messagesRequest is the part of a Messages request the simulator uses.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System json.RawMessage `json:"system"`
	Stream bool            `json:"stream"`
	Tools  []struct {
		Type        string          `json:"type"` // "" or "custom"; server tools have their own
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`

	cached bool // "cache_control" appears somewhere in the body
}

// anthropicBlock is the part of a content block the simulator reads.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // of a tool_result
}

func (c *call) parseMessages(body []byte) parsed {
	var req messagesRequest
	err := json.Unmarshal(body, &req)
	switch {
	case c.r.Header.Get("Anthropic-Version") == "":
		return parsed{model: req.Model, err: c.invalidAnthropic("anthropic-version: header is required")}
	case err != nil:
		return parsed{err: c.invalidAnthropic("There was an error parsing the body of your request: " + err.Error())}
	}
	req.cached = bytes.Contains(body, []byte(`"cache_control"`))
	p := parsed{model: req.Model, stream: req.Stream, msgs: &req}
	if msg := req.invalid(c.ep == epCountTokens); msg != "" {
		p.err = c.invalidAnthropic(msg)
	}
	return p
}

// invalid says what is wrong with a Messages request ("" nothing); a
// count has no max_tokens. (Bedrock's requests are Messages requests too.)
func (req *messagesRequest) invalid(count bool) string {
	thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
	switch {
	case req.Model == "":
		return "model: Field required"
	case req.Messages == nil:
		return "messages: Field required"
	case len(req.Messages) == 0:
		return "messages: at least one message is required"
	case count:
	case req.MaxTokens == nil:
		return "max_tokens: Field required"
	case *req.MaxTokens < 0:
		return "max_tokens: Input should be greater than or equal to 0"
	case thinking && req.Thinking.BudgetTokens < 1024:
		return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
	case thinking && req.Thinking.BudgetTokens >= *req.MaxTokens:
		return "`max_tokens` must be greater than `thinking.budget_tokens`."
	}
	return ""
}

// reply answers a Messages request. The system prompt counts as a leading
// system message, as a translation to chat sends it.
func (req *messagesRequest) reply(track bool) reply {
	cv := newConvo()
	cv.track = track
	if len(req.System) > 0 && string(req.System) != "null" {
		cv.message("system")
		forEachAnthropicText(req.System, cv.text)
	}
	asked := false
	for i, m := range req.Messages {
		cv.message(m.Role)
		last := i == len(req.Messages)-1 && m.Role == "user"
		forEachAnthropicText(m.Content, func(s string) {
			cv.text(s)
			asked = asked || (last && askedForTool(s))
		})
	}
	r := replyFor(cv, req.MaxTokens)
	if req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive") {
		r.thinking = thinkingWords
	}
	var tools []toolDef
	for _, t := range req.Tools {
		if t.Type == "" || t.Type == "custom" {
			tools = append(tools, toolDef{t.Name, t.InputSchema})
		}
	}
	choice, named := "auto", ""
	if tc := req.ToolChoice; tc != nil {
		choice = tc.Type
		if tc.Type == "tool" {
			named = tc.Name
		}
	}
	r.tool = chooseTool(tools, choice, named, asked, r.seed)
	return r
}

// forEachAnthropicText calls fn with each text of a content: the string, or
// the text blocks and the text of tool results.
func forEachAnthropicText(content json.RawMessage, fn func(string)) {
	if len(content) == 0 || content[0] != '[' {
		forEachText(content, fn)
		return
	}
	var blocks []anthropicBlock
	if json.Unmarshal(content, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			fn(b.Text)
		case "tool_result":
			forEachText(b.Content, fn)
		}
	}
}

// anthropicUsage is the token counts of a Messages answer. With
// cache_control anywhere in the request, half the prompt (at least 1) is
// read from the cache and a quarter (at least 1) written to it; input is
// the rest, as Anthropic counts only the uncached part there.
type anthropicUsage struct {
	input, cacheWrite, cacheRead, output int
}

func (req *messagesRequest) usage(r *reply) anthropicUsage {
	u := anthropicUsage{input: r.prompt, output: r.output()}
	switch {
	case r.modelled: // the prompt cache: read what it holds, write the rest where cache_control asks
		u.cacheRead = r.cached
		if req.cached {
			u.cacheWrite = r.prompt - r.cached
		}
		u.input -= u.cacheRead + u.cacheWrite
	case req.cached:
		u.cacheRead = max(r.prompt/2, 1)
		u.cacheWrite = max(r.prompt/4, 1)
		u.input -= u.cacheRead + u.cacheWrite
	}
	return u
}

func appendAnthropicUsage(b []byte, u anthropicUsage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.input), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheWrite), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheRead), 10)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheWrite), 10)
	b = append(b, `,"ephemeral_1h_input_tokens":0},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.output), 10)
	return append(b, `,"service_tier":"standard"}`...)
}

// stopReason is Anthropic's name for how the reply ended.
func (r *reply) stopReason() string {
	switch {
	case r.tool != nil:
		return "tool_use"
	case r.finish == "length":
		return "max_tokens"
	}
	return "end_turn"
}

// signature is the opaque signature of a thinking block: deterministic, so
// a replayed block can be recognised.
func (r *reply) signature() []byte { return opaque("Eq", r.seed, 40) }

// opaque returns prefix and n base62 characters derived from seed: the
// look of a provider's signatures and encrypted contents.
func opaque(prefix string, seed uint64, n int) []byte {
	b := append(make([]byte, 0, len(prefix)+n), prefix...)
	for range n {
		b = append(b, base62[splitmix64(&seed)%62])
	}
	return b
}

// thinkingSeed derives the words of the thinking from the answer's seed.
func (r *reply) thinkingSeed() uint64 { return r.seed ^ 0x5bd1e995 }

// messages answers a valid Messages request.
func (c *call) messages(req *messagesRequest) {
	if c.b.Answer != "" {
		c.replaced()
		return
	}
	r := req.reply(c.tracks())
	c.promptCached(&r.answer)
	text := c.text(&r)
	id := c.sim.appendID([]byte("msg_01"), 22)
	if req.Stream {
		c.messagesStream(req, &r, text, id)
		return
	}
	b := make([]byte, 0, 512+len(text))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, req.Model)
	padAt := len(b)
	b = append(b, `,"content":[`...)
	blocks := 0
	if r.thinking > 0 {
		b = append(b, `{"type":"thinking","thinking":"`...)
		b = appendWords(b, r.thinkingSeed(), r.thinking)
		b = append(b, `","signature":"`...)
		b = append(b, r.signature()...)
		b = append(b, `"}`...)
		blocks++
	}
	switch {
	case r.tool != nil:
		if blocks > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"tool_use","id":"`...)
		b = c.sim.appendID(append(b, "toolu_01"...), 22)
		b = append(b, `","name":`...)
		b = appendString(b, r.tool.name)
		b = append(b, `,"input":`...)
		b = append(b, r.tool.args...)
		b = append(b, '}')
	case len(text) > 0:
		if blocks > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, text)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":"`...)
	b = append(b, r.stopReason()...)
	b = append(b, `","stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, req.usage(&r))
	c.answerJSON(append(b, '}'), padAt)
}

// countTokens answers count_tokens: every prompt token, cached or not.
func (c *call) countTokens(req *messagesRequest) {
	r := req.reply(false)
	b := append([]byte(`{"input_tokens":`), strconv.Itoa(r.prompt)...)
	c.respond(http.StatusOK, "application/json", append(b, '}'))
}

// replaced answers Behavior.Answer instead of the real answer.
func (c *call) replaced() {
	ctype := c.b.AnswerType
	if ctype == "" {
		ctype = sniff(c.b.Answer)
	}
	c.respond(http.StatusOK, ctype, []byte(c.b.Answer))
}

// anthropicError renders Anthropic's error envelope.
func anthropicError(typ, msg, requestID string) []byte {
	b := make([]byte, 0, 96+len(msg))
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `},"request_id":`...)
	b = appendString(b, requestID)
	return append(b, '}')
}

// anthropicFail sends an error in Anthropic's envelope.
func (c *call) anthropicFail(status int, typ, msg string) {
	c.fail(status, anthropicError(typ, msg, c.requestID()))
}

// invalidAnthropic is a 400 invalid_request_error found while parsing.
func (c *call) invalidAnthropic(msg string) *apiError {
	return &apiError{http.StatusBadRequest, anthropicError("invalid_request_error", msg, c.requestID())}
}

// anthropicErrorType is the error.type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicFailMessage is the message of an injected failure.
func anthropicFailMessage(status int) string {
	switch status {
	case 529:
		return "Overloaded"
	case http.StatusInternalServerError:
		return "Internal server error"
	case http.StatusForbidden:
		return "Your API key does not have permission to use the specified resource."
	case http.StatusPaymentRequired:
		return "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
	}
	return http.StatusText(status)
}

// anthropicLimits sets anthropic-ratelimit-requests-* headers: limit, what
// is left, and when it resets (RFC 3339, now + reset).
func (c *call) anthropicLimits(limit, left int, reset time.Duration) {
	h := c.w.Header()
	h["Anthropic-Ratelimit-Requests-Limit"] = []string{strconv.Itoa(limit)}
	h["Anthropic-Ratelimit-Requests-Remaining"] = []string{strconv.Itoa(left)}
	h["Anthropic-Ratelimit-Requests-Reset"] = []string{time.Now().Add(reset).UTC().Format(time.RFC3339)}
}
