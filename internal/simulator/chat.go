package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// MaxCompletionTokens caps the words of one answer, whatever the request
// asks for.
const MaxCompletionTokens = 4096

// defaultCompletionTokens is the answer length when the request sets no
// max_completion_tokens or max_tokens.
const defaultCompletionTokens = 16

// chatRequest is the part of a chat completion request the simulator uses.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	MaxTokens           *int `json:"max_tokens"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func parseChat(body []byte) parsed {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{err: decodeError(err)}
	}
	p := parsed{model: req.Model, stream: req.Stream, chat: &req}
	switch {
	case req.Model == "":
		p.err = missingModel
	case req.Messages == nil:
		p.err = invalidRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	case len(req.Messages) == 0:
		p.err = invalidRequest("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", "empty_array")
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 1:
		p.err = belowMinimum("max_completion_tokens", *req.MaxCompletionTokens)
	case req.MaxTokens != nil && *req.MaxTokens < 1:
		p.err = belowMinimum("max_tokens", *req.MaxTokens)
	}
	return p
}

func belowMinimum(param string, got int) *apiError {
	return invalidRequest("Invalid '"+param+"': integer below minimum value. Expected a value >= 1, but got "+strconv.Itoa(got)+" instead.", param, "integer_below_min_value")
}

// decodeError turns an encoding/json error into OpenAI's answer: a type
// mismatch names the field, anything else is unparsable JSON.
func decodeError(err error) *apiError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		return invalidRequest("Invalid type for '"+te.Field+"': expected "+jsonKind(te.Type.Kind())+", but got "+te.Value+" instead.", te.Field, "invalid_type")
	}
	return invalidJSON
}

// jsonKind names a Go kind the way OpenAI's type errors name JSON types.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	}
	return "an integer"
}

// answer is the deterministic reply to a chat request.
type answer struct {
	seed       uint64 // of the word sequence
	completion int    // words, one token each
	prompt     int    // prompt tokens
	finish     string // "stop" or "length"
	// With a prompt cache (Options.PromptCache): the prompt's prefixes
	// that end at a message (but the whole), and the tokens read from
	// the cache.
	points   []prefixPoint
	cached   int
	modelled bool // cached comes from the prompt cache
}

// answerFor derives the reply from the messages alone (role and text), so a
// gateway that re-encodes a request still gets the same answer.
// prompt_tokens = words of text content + 3 per message + 3, OpenAI's
// per-message overhead for its chat models.
func answerFor(req *chatRequest, track bool) answer {
	cv := newConvo()
	cv.track = track
	for _, m := range req.Messages {
		cv.message(m.Role)
		forEachText(m.Content, cv.text)
	}
	a := answer{seed: cv.seed, completion: defaultCompletionTokens, finish: "stop", prompt: cv.prompt, points: cv.points}
	limit := req.MaxCompletionTokens
	if limit == nil {
		limit = req.MaxTokens
	}
	if limit != nil {
		a.completion = min(*limit, MaxCompletionTokens)
		if *limit <= MaxCompletionTokens {
			a.finish = "length"
		}
	}
	return a
}

// forEachText calls fn with the text of a message content: the string, or
// each text part of an array (chat's "text", Responses' "input_text" and
// "output_text"). Other content (images, audio) has no words.
func forEachText(content json.RawMessage, fn func(string)) {
	if len(content) == 0 {
		return
	}
	switch content[0] {
	case '"':
		var s string
		if json.Unmarshal(content, &s) == nil {
			fn(s)
		}
	case '[':
		var parts []contentPart
		if json.Unmarshal(content, &parts) == nil {
			for _, p := range parts {
				if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
					fn(p.Text)
				}
			}
		}
	}
}

// countWords counts a text's tokens as the simulator models them: a token
// per run of non-space bytes, and a token per CJK character (a Chinese
// sentence has no spaces, but a tokenizer spends about a token on each of
// its characters). Text without CJK is counted without decoding it.
func countWords(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		if s[i] >= utf8.RuneSelf {
			if r, size := utf8.DecodeRuneInString(s[i:]); sluice.IsCJK(r) {
				n++
				in = false
				i += size
				continue
			}
		}
		sp := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !sp && !in {
			n++
		}
		in = !sp
		i++
	}
	return n
}

// words is the vocabulary of answers. 64 entries, so a word is 6 bits of a
// random number; none needs JSON escaping.
var words = [64]string{
	"the", "river", "carries", "light", "through", "quiet", "valleys", "and",
	"every", "stone", "remembers", "a", "song", "of", "rain", "while",
	"gates", "open", "slowly", "to", "let", "water", "find", "its",
	"way", "toward", "distant", "fields", "where", "morning", "mist", "settles",
	"over", "green", "hills", "as", "birds", "return", "from", "long",
	"journeys", "with", "stories", "about", "mountains", "clouds", "bridges", "old",
	"towns", "under", "bright", "stars", "that", "guide", "travelers", "home",
	"before", "winter", "arrives", "in", "soft", "white", "silence", "again",
}

// nextWord returns the next word of the answer whose state is x; JSON and
// SSE answers both draw from it, so they say the same.
func nextWord(x *uint64) string {
	return words[splitmix64(x)&63]
}

// appendWords appends the n words of seed, separated by spaces.
func appendWords(b []byte, seed uint64, n int) []byte {
	x := seed
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, nextWord(&x)...)
	}
	return b
}

func appendUsage(b []byte, a answer) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(a.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(a.completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(a.prompt+a.completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(a.cached), 10)
	return append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// chat answers a valid chat completion request.
func (c *call) chat(req *chatRequest) {
	if c.b.Answer != "" {
		c.replaced()
		return
	}
	a := answerFor(req, c.tracks())
	c.promptCached(&a)
	if req.Stream {
		c.stream(req, a)
		return
	}
	b := make([]byte, 0, 560+len(req.Model)+a.completion*8)
	b = append(b, `{"id":"chatcmpl-`...)
	b = c.sim.appendID(b, 29)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, req.Model)
	padAt := len(b)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	b = appendWords(b, a.seed, a.completion)
	if c.b.EchoAuth {
		b = appendStringContent(b, " "+c.r.Header.Get("Authorization"))
	}
	b = append(b, `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, a.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendUsage(b, a)
	b = append(b, `,"service_tier":"default","system_fingerprint":null}`...)
	c.answerJSON(b, padAt)
}

// answerJSON sends a JSON answer b, padded at b[padAt] and cut as Behavior
// says.
func (c *call) answerJSON(b []byte, padAt int) {
	if c.b.Pad == 0 && c.b.CutBodyAfter == 0 {
		c.respond(http.StatusOK, "application/json", b)
		return
	}
	c.respondLong(b, padAt)
}

// appendStringContent appends s escaped as the inside of a JSON string.
func appendStringContent(b []byte, s string) []byte {
	n := len(b)
	b = appendString(b, s)
	return append(b[:n], b[n+1:len(b)-1]...)
}

// padding is what Behavior.Pad is written from, piece by piece.
var padding = bytes.Repeat([]byte{'x'}, 32<<10)

// respondLong sends the JSON answer b with Behavior.Pad bytes of padding
// at b[at], and cuts it after Behavior.CutBodyAfter bytes.
func (c *call) respondLong(b []byte, at int) {
	var before, after []byte
	if c.b.Pad > 0 {
		before, after = []byte(`,"padding":"`), []byte(`"`)
	}
	h := c.header("application/json")
	h["Content-Length"] = []string{strconv.Itoa(len(b) + len(before) + c.b.Pad + len(after))}
	c.writeHeader(http.StatusOK)
	left := c.b.CutBodyAfter // bytes until the cut; 0 never
	write := func(p []byte) bool {
		if c.b.CutBodyAfter > 0 && len(p) >= left {
			_, _ = c.w.Write(p[:left])
			c.cut()
			return false
		}
		left -= len(p)
		if _, err := c.w.Write(p); err != nil {
			c.cancelled()
			return false
		}
		return true
	}
	if !write(b[:at]) || !write(before) {
		return
	}
	for n := c.b.Pad; n > 0; n -= len(padding) {
		if !write(padding[:min(n, len(padding))]) {
			return
		}
	}
	if write(after) {
		write(b[at:])
	}
}
