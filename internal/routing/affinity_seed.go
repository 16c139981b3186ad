package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// SessionHeaders are the request headers that name a session, most
// explicit first: Sluice's own, then those the common agents send (Claude
// Code's, Codex's).
var SessionHeaders = []string{"X-Session-Id", "X-Claude-Code-Session-Id", "Session-Id", "Session_id"}

// ConversationHeader declares a conversation of the request's end user
// (X-Sluice-User or the body's user), for callers that have no session
// header of their own.
const ConversationHeader = "X-Sluice-Conversation"

// seedContentBytes bounds how much of the system prompt and of the first
// user turn a content seed hashes: enough to tell conversations apart, and
// two that share this much share a cacheable prefix anyway.
const seedContentBytes = 4096

// The kinds of seed, hashed in, so that a session ID never meets a
// conversation's content.
const (
	seedSession      = "session"
	seedConversation = "conversation"
	seedContent      = "content"
)

// Seed returns the affinity seed of req for a key of tenant: a hash (hex)
// naming its conversation, namespaced by tenant and alias, so that
// conversations of different tenants or aliases never share a binding; ""
// when the request names none and has no conversation to hash. First
// match wins: a session header (SessionHeaders), the body's
// prompt_cache_key, Anthropic's metadata.user_id (Claude Code puts its
// session there), the end user with a declared conversation
// (ConversationHeader, or Responses' conversation), else the system prompt
// and the first user turn (at most seedContentBytes of each), which stay
// the same over the turns of one conversation. Only the hash is kept:
// never the text. Requests of other protocols than the conversational
// ones (embeddings, jobs) have no prompt cache to keep, and no seed.
func Seed(tenant string, req *sluice.Request) string {
	switch req.Protocol {
	case sluice.ProtocolOpenAIChat, sluice.ProtocolAnthropic, sluice.ProtocolOpenAIResponses, sluice.ProtocolGemini:
	default:
		return ""
	}
	for _, h := range SessionHeaders {
		if v := req.Header.Get(h); v != "" {
			return SessionSeed(tenant, req.Model, v)
		}
	}
	if req.PromptCacheKey != "" {
		return SessionSeed(tenant, req.Model, req.PromptCacheKey)
	}
	b := scanSeedFields(req.Protocol, req.Body)
	if b.cacheKey != "" {
		return SessionSeed(tenant, req.Model, b.cacheKey)
	}
	if b.userID != "" {
		return SessionSeed(tenant, req.Model, b.userID)
	}
	conversation := req.Header.Get(ConversationHeader)
	if conversation == "" {
		conversation = b.conversation
	}
	if conversation != "" {
		return hashSeed(tenant, req.Model, seedConversation, req.User, conversation)
	}
	if len(b.first) == 0 {
		return ""
	}
	h := newSeedHash(tenant, req.Model, seedContent)
	writeText(h, b.system, seedContentBytes)
	h.Write([]byte{0})
	writeText(h, b.first, seedContentBytes)
	return sum(h)
}

// SessionSeed is the seed of a request that names session (a session
// header, prompt_cache_key or metadata.user_id) for a key of tenant on
// alias: what GET /admin/affinity looks a session up by.
func SessionSeed(tenant, alias, session string) string {
	return hashSeed(tenant, alias, seedSession, session)
}

func hashSeed(tenant, alias, kind string, parts ...string) string {
	h := newSeedHash(tenant, alias, kind)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return sum(h)
}

func newSeedHash(tenant, alias, kind string) hash.Hash {
	h := sha256.New()
	for _, s := range [...]string{"sluice-affinity-v1", tenant, alias, kind} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h
}

// sum is the first 128 bits of h, in hex: collisions between
// conversations are out of reach, and the store's keys stay short.
func sum(h hash.Hash) string {
	var b [sha256.Size]byte
	return hex.EncodeToString(h.Sum(b[:0])[:16])
}

// seedFields is what a seed needs of a body, raw.
type seedFields struct {
	cacheKey     string // prompt_cache_key (chat; Responses' is on the Request)
	userID       string // Anthropic metadata.user_id
	conversation string // Responses' conversation ID
	system       []byte // the system prompt: a string, blocks, or a Gemini content
	first        []byte // the first user turn's content
}

// scanSeedFields reads what a seed needs in one pass over body's top
// level, which ingress already checked is valid JSON; only the messages up
// to the first user turn are looked into, however long the conversation.
func scanSeedFields(p sluice.Protocol, body []byte) seedFields {
	var f seedFields
	var messages []byte
	_ = jsonfield.Fields(body, func(key, value []byte) error {
		switch string(key) {
		case "prompt_cache_key":
			_ = jsonfield.DecodeString(&f.cacheKey, value)
		case "metadata":
			if p == sluice.ProtocolAnthropic && isObject(value) {
				_ = jsonfield.Fields(value, func(k, v []byte) error {
					if string(k) == "user_id" {
						_ = jsonfield.DecodeString(&f.userID, v)
					}
					return nil
				})
			}
		case "conversation": // Responses: an ID, or {"id": …}
			if isObject(value) {
				value = member(value, "id")
			}
			_ = jsonfield.DecodeString(&f.conversation, value)
		case "system", "instructions", "systemInstruction":
			f.system = value
		case "messages", "contents":
			messages = value
		case "input":
			if len(value) > 0 && value[0] == '"' {
				f.first = value // a Responses input that is one user turn
			} else {
				messages = value
			}
		}
		return nil
	})
	if len(messages) > 0 && messages[0] == '[' {
		f.system, f.first = firstTurn(messages, f.system)
	}
	return f
}

// firstTurn returns the system prompt and the content of the first user
// turn of a list of messages (chat, Messages, Responses input items,
// Gemini contents): system and developer messages before the first user
// turn are the system prompt when the body had none of its own.
func firstTurn(messages, system []byte) ([]byte, []byte) {
	var first []byte
	eachElement(messages, func(m []byte) bool {
		if !isObject(m) {
			return true
		}
		var role string
		_ = jsonfield.DecodeString(&role, member(m, "role"))
		content := member(m, "content")
		if content == nil {
			content = member(m, "parts") // Gemini
		}
		switch role {
		case "system", "developer":
			if system == nil {
				system = content
			}
			return true
		case "user", "": // Gemini may leave a user turn's role out
			if content == nil {
				return true // a Responses item of another type
			}
			first = content
			return false
		}
		return true
	})
	return system, first
}

// writeText hashes the text of a content value, at most limit bytes: a
// string, or the text of each block or part of a list (images and other
// blocks are left out, and so is cache_control, which clients move from
// turn to turn), or of a Gemini content's parts.
func writeText(h hash.Hash, v []byte, limit int) int {
	switch {
	case len(v) == 0 || limit <= 0:
		return limit
	case v[0] == '"':
		n := min(len(v), limit)
		h.Write(v[:n])
		return limit - n
	case v[0] == '[':
		eachElement(v, func(e []byte) bool {
			if isObject(e) {
				e = member(e, "text")
			}
			if len(e) > 0 && e[0] == '"' {
				limit = writeText(h, e, limit)
			}
			return limit > 0
		})
		return limit
	case isObject(v):
		return writeText(h, member(v, "parts"), limit)
	}
	return limit
}

func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// member returns the raw value of obj's top-level member key, nil when it
// has none.
func member(obj []byte, key string) []byte {
	var out []byte
	_ = jsonfield.Fields(obj, func(k, v []byte) error {
		if string(k) == key {
			out = v
		}
		return nil
	})
	return out
}

// eachElement calls fn with each element of arr, a valid JSON array, in
// order, until fn returns false.
func eachElement(arr []byte, fn func(elem []byte) bool) {
	i := skipSpace(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		end := skipJSON(arr, i)
		if !fn(arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipJSON returns the end of the valid JSON value that starts at i.
func skipJSON(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
