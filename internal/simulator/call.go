package simulator

import (
	"net/http"
	"strconv"
	"time"
)

// call is one request being served. It lives for one ServeHTTP.
type call struct {
	sim   *Simulator
	w     http.ResponseWriter
	r     *http.Request
	ep    endpoint
	b     Behavior
	reqID string // see requestID
	rec   *Recorded
	sent  bool        // headers written
	timer *time.Timer // reused by every wait of the call
	kept  bool        // a job took over the request's concurrency slot
}

// wait sleeps d. It returns false when the request must end instead: the
// client went away (recorded as cancelled) or the simulator was closed (the
// connection is dropped).
func (c *call) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return true
	case <-c.r.Context().Done():
		c.timer.Stop()
		c.cancelled()
		return false
	case <-c.sim.closing:
		c.timer.Stop()
		c.cut()
		return false
	}
}

// cancelled records that the client went away.
func (c *call) cancelled() {
	status := http.StatusOK
	if !c.sent {
		status = 499 // nginx's "client closed request": nothing was sent
	}
	c.sim.journal.cancel(c.rec, status)
}

// cut drops the connection without finishing the response, so the client
// sees an unexpected EOF (HTTP/1) or a stream reset (HTTP/2).
func (c *call) cut() {
	rc := http.NewResponseController(c.w)
	if c.r.ProtoMajor >= 2 {
		// HTTP/2 can't be hijacked; this sentinel panic is net/http's way
		// to reset the stream, and it logs no stack trace.
		panic(http.ErrAbortHandler)
	}
	if c.sent {
		_ = rc.Flush() // what was written reaches the client before the cut
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not a real connection (httptest.ResponseRecorder): ending the
		// body early is the closest equivalent.
		return
	}
	_ = conn.Close()
}

// requestID returns the id of this response, made on first use: error
// bodies of Anthropic quote the id its header sends.
func (c *call) requestID() string {
	if c.reqID == "" {
		c.reqID = c.sim.requestID()
	}
	return c.reqID
}

// header sets the headers every response has and returns the map:
// Anthropic names its request id header request-id, OpenAI x-request-id.
func (c *call) header(contentType string) http.Header {
	h := c.w.Header()
	h["Content-Type"] = []string{contentType}
	switch {
	case c.ep.anthropic():
		h["Request-Id"] = []string{c.requestID()}
	case c.ep.bedrock():
		h["X-Amzn-Requestid"] = []string{c.requestID()}
	default:
		h["X-Request-Id"] = []string{c.requestID()}
	}
	return h
}

// credentialHeader returns the header value that carried the credential,
// for EchoAuth: x-api-key on Anthropic's endpoints when present, else
// Authorization.
func (c *call) credentialHeader() string {
	if v := c.r.Header.Get("X-Api-Key"); v != "" && c.ep.anthropic() {
		return v
	}
	if c.ep.gemini() {
		return geminiKeyOf(c.r)
	}
	return c.r.Header.Get("Authorization")
}

// writeHeader sends status and records it.
func (c *call) writeHeader(status int) {
	c.sent = true
	c.sim.journal.setStatus(c.rec, status)
	c.w.WriteHeader(status)
}

// respond sends a complete response; write errors mean the client is gone,
// which the next request on a new connection will not notice, so they are
// ignored.
func (c *call) respond(status int, contentType string, body []byte) {
	h := c.header(contentType)
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	c.writeHeader(status)
	_, _ = c.w.Write(body)
}

// fail sends an error with a JSON body.
func (c *call) fail(status int, body []byte) {
	c.respond(status, "application/json", body)
}

// capped sets x-ratelimit-* request headers when a concurrency cap applies,
// as OpenAI sends them on successful responses too.
func (c *call) capped(acct AccountLimits, hasAcct bool) {
	if !hasAcct {
		acct = AccountLimits{}
	}
	limit, left, ok := c.sim.gauges.remaining(c.rec.Key, c.b, acct)
	if !ok {
		return
	}
	h := c.w.Header()
	switch {
	case c.ep.gemini() || c.ep.bedrock():
		return // Gemini and Bedrock send no rate-limit headers
	case c.ep.anthropic():
		c.anthropicLimits(limit, left, 0)
		return
	}
	h["X-Ratelimit-Limit-Requests"] = []string{strconv.Itoa(limit)}
	h["X-Ratelimit-Remaining-Requests"] = []string{strconv.Itoa(left)}
	h["X-Ratelimit-Reset-Requests"] = []string{"0s"}
}

// defaultRetryAfter is sent when a Behavior or AccountLimits leaves
// RetryAfter at 0: OpenAI always sends a hint with its 429s.
const defaultRetryAfter = time.Second

// rateLimited answers 429 with the provider's body and headers.
func (c *call) rateLimited(limit int, retryAfter time.Duration, model string) {
	retryAfter = c.rateLimitHeaders(limit, retryAfter)
	c.rateLimitError(model, limit, retryAfter)
}

// rateLimitError sends the body of a 429 whose headers are set: Anthropic's
// rate_limit_error, the ChatGPT backend's usage_limit_reached, else
// OpenAI's rate_limit_exceeded.
func (c *call) rateLimitError(model string, limit int, retryAfter time.Duration) {
	switch {
	case c.ep.bedrock():
		c.bedrockFailure(http.StatusTooManyRequests)
	case c.ep.gemini():
		c.fail(http.StatusTooManyRequests, geminiRateLimited(model, limit, retryAfter))
	case c.ep.anthropic():
		c.anthropicFail(http.StatusTooManyRequests, "rate_limit_error",
			"This request would exceed your organization's rate limit of "+strconv.Itoa(limit)+" concurrent requests. Please try again later.")
	case c.codex():
		c.fail(http.StatusTooManyRequests, usageLimitReached(int64((retryAfter+time.Second-1)/time.Second)))
	default:
		c.fail(http.StatusTooManyRequests, rateLimitBody(model, c.b.Account, limit, retryAfter))
	}
}

// rateLimitHeaders sets the headers of a 429 and returns the retry hint
// sent (0 for none): OpenAI's retry-after, retry-after-ms and
// x-ratelimit-*, or Anthropic's retry-after and anthropic-ratelimit-*.
func (c *call) rateLimitHeaders(limit int, retryAfter time.Duration) time.Duration {
	if retryAfter == 0 {
		retryAfter = defaultRetryAfter
	}
	if c.ep.gemini() {
		return max(retryAfter, 0) // in the body's RetryInfo: Gemini sends no header
	}
	if c.ep.bedrock() {
		return 0 // Bedrock sends no hint
	}
	if c.codex() {
		return max(retryAfter, 0) // in the body's resets_in_seconds: the ChatGPT backend sends no header
	}
	h := c.w.Header()
	if c.ep.anthropic() {
		c.anthropicLimits(limit, 0, max(retryAfter, 0))
	} else {
		h["X-Ratelimit-Limit-Requests"] = []string{strconv.Itoa(limit)}
		h["X-Ratelimit-Remaining-Requests"] = []string{"0"}
	}
	if retryAfter < 0 {
		return 0
	}
	secs := (retryAfter + time.Second - 1) / time.Second
	h["Retry-After"] = []string{strconv.FormatInt(int64(secs), 10)}
	if !c.ep.anthropic() {
		ms := (retryAfter + time.Millisecond - 1) / time.Millisecond
		h["Retry-After-Ms"] = []string{strconv.FormatInt(int64(ms), 10)}
		h["X-Ratelimit-Reset-Requests"] = []string{retryAfter.String()}
	}
	return retryAfter
}

// injected answers Behavior.FailStatus.
func (c *call) injected(model string) {
	st, body := c.b.FailStatus, c.b.FailBody
	if st == http.StatusTooManyRequests {
		limit := c.b.MaxInflight
		if limit == 0 {
			limit = nominalLimit
		}
		retryAfter := c.rateLimitHeaders(limit, c.b.RetryAfter)
		if body == "" {
			c.rateLimitError(model, limit, retryAfter)
			return
		}
	}
	if c.b.EchoAuth {
		auth := c.credentialHeader()
		c.w.Header()["X-Echo-Authorization"] = []string{auth}
		if body == "" && c.ep.anthropic() {
			c.anthropicFail(st, anthropicErrorType(st), "Unsupported request header: "+auth)
			return
		}
		if body == "" {
			c.fail(st, openAIError("Unsupported request header: Authorization: "+auth, "invalid_request_error", "", ""))
			return
		}
	}
	if c.ep.bedrock() {
		c.bedrockFailure(st)
		return
	}
	if body != "" {
		c.respond(st, sniff(body), []byte(body))
		return
	}
	if st == http.StatusUnauthorized {
		c.invalidKey(c.rec.Key)
		return
	}
	if c.ep.gemini() {
		c.fail(geminiFailure(st))
		return
	}
	if c.ep.anthropic() && (st < 520 || st > 530 || st == 529) {
		c.anthropicFail(st, anthropicErrorType(st), anthropicFailMessage(st))
		return
	}
	ctype, b := failureBody(st)
	if ctype == htmlType {
		// Cloudflare answers these, not the origin.
		h := c.w.Header()
		h["Server"] = []string{"cloudflare"}
		h["Cf-Ray"] = []string{c.sim.requestID()[4:20] + "-SJC"}
	}
	c.respond(st, ctype, b)
}

// nominalLimit is the x-ratelimit-limit-requests of an injected 429 when the
// key has no cap of its own.
const nominalLimit = 500

// sniff guesses the content type of a FailBody.
func sniff(body string) string {
	switch body[0] {
	case '{', '[':
		return "application/json"
	case '<':
		return htmlType
	}
	return "text/plain; charset=utf-8"
}
