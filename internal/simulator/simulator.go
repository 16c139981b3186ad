// Package simulator is the simulated upstream provider that Sluice ships: an
// http.Handler that speaks the OpenAI wire format (chat completions as JSON and
// SSE, embeddings, models), OpenAI Responses and Anthropic Messages with
// deterministic answers, and misbehaves on demand per key: latency, slow or
// cut or stalled streams, concurrency caps that answer 429, injected 5xx, 52x
// and 529 failures, invalid keys, and 200s that are not what the route speaks
// (an HTML page, a garbled event, a body cut short), or that echo the
// request's credential. Each protocol answers in its own envelope and headers.
// It records every request it receives so tests can check which credential
// got what.
//
// Anthropic Messages (POST /v1/messages, also ?beta=true, and
// /v1/messages/count_tokens) takes the key in x-api-key or as a Bearer token
// and requires anthropic-version. Answers carry thinking blocks when
// thinking is enabled, and cache read and write tokens when cache_control
// appears anywhere in the request. OpenAI Responses (POST /v1/responses,
// /v1/responses/compact, GET and DELETE /v1/responses/{id}, POST
// /v1/responses/{id}/cancel, and the same under /backend-api/codex, with
// the ChatGPT backend's rules there: chatgpt.go) stores
// responses per key: previous_response_id and the follow-ups answer 404 to
// any other key. A background response runs like a job
// (Behavior.JobDuration) and only it can be cancelled. Both protocols answer
// with a tool call as ToolWord says, and with the same words as chat for the
// same conversation: 16 of them, fewer when max_tokens or max_output_tokens
// is smaller (stop_reason max_tokens, status incomplete).
//
// It is the upstream of the gateway's tests and throughput benchmarks, so the
// hot path avoids reflection when encoding responses and never logs.
//
// The package depends only on the standard library: it stands in for a
// provider, so it must not share code (and with it, bugs) with the gateway it
// tests.
package simulator

import (
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModels are served by GET /v1/models when Options.Models is empty.
var DefaultModels = []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "text-embedding-3-small", "text-embedding-3-large"}

// Options configure a Simulator. They are read once by New.
type Options struct {
	// Models are served by GET /v1/models, and only they are accepted by
	// chat completions, embeddings, Messages and Responses (others answer
	// 404 model_not_found, or Anthropic's not_found_error).
	// When empty, DefaultModels are listed and any model is accepted.
	Models []string
	// Keys holds the behaviour per key (a bearer token, Anthropic x-api-key
	// or fal key); keys not listed get Default.
	Keys map[string]Behavior
	// Default is the behaviour of keys not in Keys.
	Default Behavior
	// RejectUnknownKeys makes keys not in Keys answer 401 invalid_api_key.
	RejectUnknownKeys bool
	// Accounts maps an account id to limits shared by every key whose
	// Behavior.Account is that id.
	Accounts map[string]AccountLimits
	// MaxRecords bounds what Requests keeps: the newest MaxRecords requests.
	// 0 keeps all of them; a negative value keeps none. Counters are exact
	// either way. Long benchmarks and `sluice demo-upstream` set it so memory
	// stays flat.
	MaxRecords int
	// PromptCache models the providers' prompt caches, for this long after
	// a prefix was last used (providers keep them 5 minutes to an hour):
	// per account (Behavior.Account, else the key) it remembers the
	// prefixes of the prompts it served, message by message, and a
	// request's cached input tokens are those of its longest prefix the
	// account served — in chat's prompt_tokens_details.cached_tokens,
	// Messages' cache_read_input_tokens (the rest written to the cache
	// with cache_control, cache_creation_input_tokens), Responses'
	// input_tokens_details.cached_tokens and Gemini's
	// cachedContentTokenCount. 0 models none: Messages then
	// reads half the prompt from the cache when the request has
	// cache_control, and Responses half when it has prompt_cache_key.
	PromptCache time.Duration
	// AWSKeys are the AWS access keys (by access key ID) whose SigV4
	// signatures Bedrock's paths accept; a request signed with another key
	// answers 403 UnrecognizedClientException, one whose signature does not
	// match 403 InvalidSignatureException. The access key ID is the
	// request's key (Keys, Behavior).
	AWSKeys map[string]AWSKey
}

// Behavior is how the simulator treats requests made with one bearer key.
// The zero value answers promptly and correctly.
type Behavior struct {
	// Account groups keys: keys with the same Account share the
	// AccountLimits of that id, and MaxInFlight reports its peak.
	Account string
	// Latency is waited before the response headers, also before injected
	// failures, but not before 401s and 429s from caps (those are cheap
	// rejections at a real provider too).
	Latency time.Duration
	// ChunkDelay is waited between SSE events.
	ChunkDelay time.Duration
	// MaxInflight caps concurrent requests of this key; a request over it
	// answers 429 rate_limit_exceeded. 0 means no cap.
	MaxInflight int
	// Invalid makes every request answer 401 invalid_api_key.
	Invalid bool
	// FailStatus makes every request answer this status after Latency, with
	// a body like the real one: OpenAI server_error JSON for 5xx, a
	// Cloudflare HTML page for 520-530, Anthropic's overloaded_error for
	// 529, the rate-limit body and headers for 429.
	FailStatus int
	// FailBody replaces the body sent with FailStatus. Its content type is
	// guessed from its first byte ('{' JSON, '<' HTML, else plain text).
	// From Bedrock it is the message of the error (AWSError's, else the
	// status's), in Bedrock's {"message"} body.
	FailBody string
	// RetryAfter is sent with 429s caused by this key (its cap, or
	// FailStatus 429) as retry-after (seconds, rounded up) and
	// retry-after-ms. 0 sends 1s; a negative value sends no retry headers.
	RetryAfter time.Duration
	// CutAfter drops the connection abruptly after this many content events
	// of a stream (or after the last one, if the answer is shorter): no
	// finish chunk, no [DONE]. 0 never cuts. JSON responses ignore it.
	CutAfter int
	// StallAfter stops a stream after this many content events (or after
	// the last one) and holds the connection until the client goes away.
	// 0 never stalls. JSON responses ignore it.
	StallAfter int
	// ErrorAfter ends a stream after this many content events (or after the
	// last one) with a mid-stream error event, as the provider sends when it
	// fails after the 200: chat's `data: {"error":{...}}` (no [DONE]),
	// Anthropic's `event: error` overloaded_error, Responses' `event: error`.
	// 0 never does.
	ErrorAfter int
	// GarbleAfter sends, after this many content events of a stream (or
	// after the last one), an event whose data is not JSON (a chunk cut
	// short), then goes on as usual. 0 never does.
	GarbleAfter int
	// Answer replaces a chat answer (JSON or stream) with this body, sent
	// with status 200 and AnswerType: a provider's proxy answering for it
	// with an HTML page, say. "" sends the real answer.
	Answer string
	// AnswerType is the content type of Answer; "" guesses it as for
	// FailBody.
	AnswerType string
	// Pad makes a JSON answer (chat, Messages, Responses) longer by a
	// top-level "padding" member whose string value is Pad bytes long. It
	// is written in pieces, so the simulator never holds it. 0 adds none.
	Pad int
	// CutBodyAfter drops the connection after this many bytes of a JSON
	// answer's body (chat, Messages, Responses), whose Content-Length
	// announces it whole. 0 never cuts.
	CutBodyAfter int
	// EchoAuth quotes the request's credential header (Authorization, or
	// Anthropic's x-api-key) back, as upstreams that echo what they were
	// sent do: with FailStatus (and no FailBody) in the error message and
	// in an X-Echo-Authorization header; otherwise in the answer's text
	// (the JSON answer's, and a stream's content).
	EchoAuth bool
	// JobDuration is how long an async job (OpenAI video, fal queue request,
	// background response) submitted with this key runs: queued for the
	// first quarter, then in_progress, then terminal. 0 means 2s. A video
	// or fal job holds a MaxInflight slot of its key and account until it
	// is terminal (or deleted, or cancelled); a background response holds
	// none.
	JobDuration time.Duration
	// JobFail makes jobs of this key end failed instead of completed: OpenAI
	// status "failed" with error{code,message}, fal COMPLETED with error and
	// error_type, and an error on the result.
	JobFail bool
	// AWSError names the error FailStatus answers on Bedrock's paths
	// (x-amzn-ErrorType: ServiceQuotaExceededException,
	// ModelNotReadyException, …); "" the status's usual one.
	AWSError string
	// ChatGPTAccount is the ChatGPT account of the key (an access token
	// of NewRefreshToken has its grant's): the ChatGPT backend's paths
	// refuse another in chatgpt-account-id. "" takes any.
	ChatGPTAccount string
}

// AccountLimits are shared by all keys of one account.
type AccountLimits struct {
	// MaxInflight caps concurrent requests across the account's keys; a
	// request over it answers 429. 0 means no cap.
	MaxInflight int
	// RetryAfter is sent with the account's 429s, like Behavior.RetryAfter.
	RetryAfter time.Duration
}

// Simulator is the simulated provider. It implements http.Handler and is
// safe for concurrent use. Create it with New.
type Simulator struct {
	modelSet  map[string]bool // nil: any model is accepted
	modelList []byte          // GET /v1/models body, rendered once
	// geminiModels are listed by GET /v1beta/models.
	geminiModels []string
	accounts     map[string]AccountLimits
	strict       bool // Options.RejectUnknownKeys
	awsKeys      map[string]AWSKey

	keysMu sync.RWMutex
	keys   map[string]Behavior
	def    Behavior

	journal journal
	gauges  gauges
	jobs    jobStore
	stored  responseStore
	oauth   oauthServer
	cloud   cloudState

	nonce uint64        // makes ids differ between simulators
	seq   atomic.Uint64 // makes ids differ between requests

	cache *promptCache // nil: Options.PromptCache 0

	closing   chan struct{}
	closeOnce sync.Once
}

// New returns a simulator for opts. It copies what it keeps, so the caller
// may reuse opts.
func New(opts Options) *Simulator {
	s := &Simulator{
		accounts: make(map[string]AccountLimits, len(opts.Accounts)),
		awsKeys:  maps.Clone(opts.AWSKeys),
		strict:   opts.RejectUnknownKeys,
		keys:     make(map[string]Behavior, len(opts.Keys)),
		def:      opts.Default,
		nonce:    rand.Uint64(),
		closing:  make(chan struct{}),
	}
	if opts.PromptCache > 0 {
		s.cache = &promptCache{ttl: opts.PromptCache, entries: map[cacheEntry]time.Time{}}
	}
	s.modelList = renderModelList(DefaultModels)
	s.geminiModels = defaultGeminiModels
	if len(opts.Models) > 0 {
		s.modelList = renderModelList(opts.Models)
		s.geminiModels = append([]string(nil), opts.Models...)
		s.modelSet = make(map[string]bool, len(opts.Models))
		for _, m := range opts.Models {
			s.modelSet[m] = true
		}
	}
	for id, l := range opts.Accounts {
		s.accounts[id] = l
	}
	for k, b := range opts.Keys {
		s.keys[k] = b
	}
	s.journal.init(opts.MaxRecords)
	s.gauges.init()
	s.jobs.init()
	s.stored.init()
	return s
}

// SetKey sets the behaviour of requests made with key from now on; requests
// already running keep the behaviour they started with. Safe for concurrent
// use.
func (s *Simulator) SetKey(key string, b Behavior) {
	s.keysMu.Lock()
	s.keys[key] = b
	s.keysMu.Unlock()
}

// Close makes every request that is waiting (Latency, ChunkDelay, a stall)
// drop its connection at once, and later waits do the same. Without it a
// stalled stream would keep httptest.Server.Close or http.Server.Shutdown
// waiting for its client. Register it to run before the server's Close
// (t.Cleanup runs last-registered first). Idempotent.
func (s *Simulator) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
}

// behavior returns the behaviour for key and whether key is listed.
func (s *Simulator) behavior(key string) (Behavior, bool) {
	s.keysMu.RLock()
	b, ok := s.keys[key]
	s.keysMu.RUnlock()
	if !ok {
		b = s.def
	}
	return b, ok
}

// maxBody bounds request bodies; OpenAI's own limit is in this range and a
// bound keeps a broken client from exhausting the test process.
const maxBody = 32 << 20

// ServeHTTP serves POST /v1/chat/completions, POST /v1/embeddings,
// GET /v1/models and GET /v1/models/{model}, Anthropic Messages, OpenAI
// Responses (see the package doc), the OpenAI Videos job API
// (POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content,
// DELETE /v1/videos/{id}) and the fal queue API (POST /{owner}/{app}[/...],
// GET /{owner}/{app}/requests/{id}[/status], PUT .../requests/{id}/cancel;
// authenticated with "Authorization: Key ..."). It records the request, then
// answers the first that applies: 404 for another path, 401 without a key or
// for an invalid one, 429 over a concurrency cap (not for job follow-ups);
// then, after Latency, FailStatus, 400 for an invalid body, 404 for an
// unknown model (not for jobs), and finally the answer. OAuthTokenPath is
// the OAuth token endpoint.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == OAuthTokenPath {
		s.oauthToken(w, r)
		return
	}
	if s.serveHosted(w, r) {
		return // a cloud's path, served as its provider's (vertex.go)
	}
	ep := route(r)
	c := &call{sim: s, w: w, r: r, ep: ep}
	key, hasKey := credential(r, ep)
	b, listed := s.behavior(key)
	c.b = b

	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = readBody(w, r)
		if err != nil {
			c.rec = s.journal.add(key, r, nil, "", false)
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				c.tooLarge()
			} else {
				c.cancelled() // the client left while sending
			}
			return
		}
	}
	var p parsed
	switch ep {
	case epChat:
		p = parseChat(body)
	case epEmbeddings:
		p = parseEmbeddings(body)
	case epVideoCreate:
		p = parseVideo(body, r.Header.Get("Content-Type"))
	case epFalSubmit:
		p.model = strings.TrimPrefix(r.URL.Path, "/")
	case epMessages, epCountTokens:
		p = c.parseMessages(body)
	case epResponses, epCompact:
		p = c.parseResponses(body)
	case epGeminiGenerate, epGeminiStream, epGeminiCount, epGeminiEmbed, epGeminiBatchEmbed:
		p = c.parseGemini(body)
	case epBedrockInvoke, epBedrockStream:
		p = c.parseBedrock(body)
	}
	c.rec = s.journal.add(key, r, body, p.model, p.stream)

	switch {
	case ep == epNone:
		c.fail(http.StatusNotFound, invalidURL(r))
		return
	case !hasKey:
		c.missingKey()
		return
	case b.Invalid || (s.strict && !listed) || s.accessRefused(key, r, ep):
		c.invalidKey(key)
		return
	case c.codex() && c.chatgptAccountRefused():
		return // answered
	case ep.bedrock() && !c.bedrockSigned(key, body):
		return // answered
	}

	if ep.followUp() {
		// Polls hold no slot: a running job already holds one.
		if !c.wait(b.Latency) {
			return
		}
		switch {
		case b.FailStatus != 0:
			c.injected(p.model)
		case ep.fal():
			c.falFollowUp(ep)
		case ep.storedResponse():
			c.responseFollowUp(ep)
		default:
			c.videoFollowUp(ep)
		}
		return
	}

	if ep == epVideoCreate || ep == epFalSubmit {
		s.settleJobs() // finished jobs give their slots back first
	}
	acct, hasAcct := s.accounts[b.Account]
	if ok, rej := s.gauges.admit(key, b, acct, hasAcct); !ok {
		c.rateLimited(rej.limit, rej.retryAfter, p.model)
		return
	}
	defer func() {
		if !c.kept {
			s.gauges.release(key, b.Account)
		}
	}()
	c.capped(acct, hasAcct)

	if !c.wait(b.Latency) {
		return
	}
	switch {
	case b.FailStatus != 0:
		c.injected(p.model)
	case p.err != nil:
		c.fail(p.err.status, p.err.body)
	case ep == epVideoCreate:
		c.videoCreate(p.video)
	case ep == epFalSubmit:
		c.falSubmit(body)
	case ep == epModels:
		c.models()
	case ep == epModel:
		c.model(strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	case ep == epGeminiModels || ep == epGeminiModel:
		c.geminiModels()
	case s.modelSet != nil && !s.modelSet[p.model]:
		c.modelNotFound(p.model)
	case ep == epChat:
		c.chat(p.chat)
	case ep == epEmbeddings:
		c.embeddings(p.embed)
	case ep == epMessages || ep.bedrock():
		c.messages(p.msgs)
	case ep == epCountTokens:
		c.countTokens(p.msgs)
	case ep == epResponses:
		c.responses(p.resp)
	case ep == epCompact:
		c.compact(p.resp)
	case ep == epGeminiGenerate || ep == epGeminiStream:
		c.generate(p.gem)
	case ep == epGeminiCount:
		c.geminiCount(p.gem)
	case ep == epGeminiEmbed || ep == epGeminiBatchEmbed:
		c.geminiEmbed(p.gemEmbed)
	}
}

// readBody reads the whole body, at most maxBody bytes, in one allocation
// when the client declared its length (they all do but chunked uploads).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	if n := r.ContentLength; n > 0 && n <= maxBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(body)
}

// credential extracts the key of a request: a Bearer token, for fal
// "Authorization: Key <FAL_KEY>", for Anthropic x-api-key (or a Bearer token,
// as some SDKs and proxies send).
func credential(r *http.Request, ep endpoint) (string, bool) {
	if ep.gemini() {
		key := geminiKeyOf(r)
		return key, key != ""
	}
	if ep.bedrock() {
		key := bedrockKeyOf(r)
		return key, key != ""
	}
	if ep.anthropic() {
		if key := strings.TrimSpace(r.Header.Get("X-Api-Key")); key != "" {
			return key, true
		}
	}
	h := r.Header.Get("Authorization")
	prefix := "Bearer "
	if ep.fal() {
		prefix = "Key "
	}
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	key := strings.TrimSpace(h[len(prefix):])
	return key, key != ""
}

type endpoint int

const (
	epNone endpoint = iota
	epChat
	epEmbeddings
	epModels
	epModel
	epVideoCreate
	epVideoGet
	epVideoContent
	epVideoDelete
	epMessages         // Anthropic POST /v1/messages
	epCountTokens      // Anthropic POST /v1/messages/count_tokens
	epResponses        // POST /v1/responses
	epCompact          // POST /v1/responses/compact
	epResponseGet      // GET /v1/responses/{id}
	epResponseDelete   // DELETE /v1/responses/{id}
	epResponseCancel   // POST /v1/responses/{id}/cancel
	epGeminiGenerate   // POST /v1beta/models/{model}:generateContent
	epGeminiStream     // …:streamGenerateContent
	epGeminiCount      // …:countTokens
	epGeminiEmbed      // …:embedContent
	epGeminiBatchEmbed // …:batchEmbedContents
	epGeminiModels     // GET /v1beta/models
	epGeminiModel      // GET /v1beta/models/{model}
	epBedrockInvoke    // POST /model/{modelId}/invoke
	epBedrockStream    // …/invoke-with-response-stream
	epFalSubmit
	epFalStatus
	epFalResult
	epFalCancel
)

func (e endpoint) fal() bool { return e >= epFalSubmit }

// anthropic reports an endpoint whose errors and headers are Anthropic's.
func (e endpoint) anthropic() bool { return e == epMessages || e == epCountTokens }

// gemini reports an endpoint of the Gemini API: its key, errors and
// headers are Google's.
func (e endpoint) gemini() bool { return e >= epGeminiGenerate && e <= epGeminiModel }

// storedResponse reports a request about a stored response.
func (e endpoint) storedResponse() bool {
	return e == epResponseGet || e == epResponseDelete || e == epResponseCancel
}

// followUp reports a request about an existing job.
func (e endpoint) followUp() bool {
	switch e {
	case epVideoGet, epVideoContent, epVideoDelete, epFalStatus, epFalResult, epFalCancel,
		epResponseGet, epResponseDelete, epResponseCancel:
		return true
	}
	return false
}

func route(r *http.Request) endpoint {
	if ep := routeGemini(r); ep != epNone && (strings.HasPrefix(r.URL.Path, "/v1beta/") || ep != epGeminiModels && ep != epGeminiModel || geminiKeyOf(r) != "") {
		return ep // GET /v1/models… is OpenAI's but with a Gemini key
	}
	switch p := r.URL.Path; {
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		return epChat
	case r.Method == http.MethodPost && p == "/v1/embeddings":
		return epEmbeddings
	case r.Method == http.MethodPost && p == "/v1/messages":
		return epMessages
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		return epCountTokens
	case strings.HasPrefix(p, "/v1/responses") || strings.HasPrefix(p, codexPrefix+"/responses"):
		return routeResponses(r)
	case r.Method == http.MethodGet && p == "/v1/models":
		return epModels
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/models/") && len(p) > len("/v1/models/"):
		return epModel
	case r.Method == http.MethodPost && p == "/v1/videos":
		return epVideoCreate
	case strings.HasPrefix(p, "/v1/videos/"):
		id, content := strings.CutSuffix(p[len("/v1/videos/"):], "/content")
		switch {
		case id == "" || strings.Contains(id, "/"):
		case content && r.Method == http.MethodGet:
			return epVideoContent
		case !content && r.Method == http.MethodGet:
			return epVideoGet
		case !content && r.Method == http.MethodDelete:
			return epVideoDelete
		}
		return epNone
	}
	if ep := routeBedrock(r); ep != epNone {
		return ep
	}
	return routeFal(r)
}

func routeFal(r *http.Request) endpoint {
	segs := falPath(r.URL.Path)
	switch {
	case segs == nil:
	case len(segs) >= 3 && segs[2] == "requests":
		switch {
		case len(segs) == 4 && r.Method == http.MethodGet:
			return epFalResult
		case len(segs) == 5 && segs[4] == "status" && r.Method == http.MethodGet:
			return epFalStatus
		case len(segs) == 5 && segs[4] == "cancel" && r.Method == http.MethodPut:
			return epFalCancel
		}
	case r.Method == http.MethodPost:
		return epFalSubmit
	}
	return epNone
}

// parsed is what ServeHTTP needs from a request body, decoded once.
type parsed struct {
	model  string
	stream bool
	chat   *chatRequest
	embed  *embeddingsRequest
	msgs   *messagesRequest
	resp   *responsesRequest
	video  *videoRequest
	gem    *geminiRequest
	// gemEmbed are a Gemini embedding's requests: one, or a batch's.
	gemEmbed []geminiEmbedRequest
	err      *apiError // answered after Latency, like a real provider validating
}
