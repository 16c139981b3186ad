package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API (generativelanguage): POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent (server-sent
// events with ?alt=sse, else one JSON array written chunk by chunk),
// :countTokens, :embedContent and :batchEmbedContents, GET /v1beta/models and
// /v1beta/models/{model}; the same under /v1. The key is x-goog-api-key or
// ?key=; errors are Google's envelope {"error":{"code","message","status",
// "details"}}. A GET /v1/models… is Gemini's when it carries a Gemini key.

// defaultGeminiModels are listed by GET /v1beta/models when Options.Models
// is empty.
var defaultGeminiModels = []string{"gemini-2.5-flash", "gemini-2.5-pro", "gemini-embedding-001"}

// geminiEmbedDimensions is the size of a Gemini embedding without
// outputDimensionality.
const geminiEmbedDimensions = 8

// routeGemini routes a Gemini path, epNone for another.
func routeGemini(r *http.Request) endpoint {
	p := r.URL.Path
	rest, ok := strings.CutPrefix(p, "/v1beta/models")
	if !ok {
		rest, ok = strings.CutPrefix(p, "/v1/models")
	}
	switch {
	case !ok:
		return epNone
	case r.Method == http.MethodGet && rest == "":
		return epGeminiModels
	case r.Method == http.MethodGet && len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"):
		return epGeminiModel
	case r.Method != http.MethodPost || len(rest) < 2 || rest[0] != '/':
		return epNone
	}
	_, method, _ := strings.Cut(rest[1:], ":")
	switch method {
	case "generateContent":
		return epGeminiGenerate
	case "streamGenerateContent":
		return epGeminiStream
	case "countTokens":
		return epGeminiCount
	case "embedContent":
		return epGeminiEmbed
	case "batchEmbedContents":
		return epGeminiBatchEmbed
	}
	return epNone
}

// geminiKeyOf returns the Gemini key of a request: x-goog-api-key, else
// the key query parameter.
func geminiKeyOf(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-Goog-Api-Key")); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// geminiModelOf is the model a Gemini path names, without its method.
func geminiModelOf(r *http.Request) string {
	m := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	m, _, _ = strings.Cut(m, ":")
	return m
}

// geminiPart is the part of a Part the simulator reads.
type geminiPart struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	FunctionResponse *struct {
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// geminiContent is a Content: a role and parts.
type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// geminiRequest is the part of a generateContent request the simulator uses.
type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		MaxOutputTokens *int `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			ThinkingBudget  *int `json:"thinkingBudget"`
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	CachedContent string `json:"cachedContent"`
	// A count's request may wrap the whole request.
	GenerateContentRequest *geminiRequest `json:"generateContentRequest"`

	model string // from the path
}

// geminiEmbedRequest is an embedContent request, or one of a batch's.
type geminiEmbedRequest struct {
	Model                string        `json:"model"`
	Content              geminiContent `json:"content"`
	OutputDimensionality *int          `json:"outputDimensionality"`
}

// parseGemini reads a Gemini request of endpoint c.ep.
func (c *call) parseGemini(body []byte) parsed {
	model := geminiModelOf(c.r)
	p := parsed{model: model, stream: c.ep == epGeminiStream}
	switch c.ep {
	case epGeminiEmbed, epGeminiBatchEmbed:
		var batch struct {
			Requests []geminiEmbedRequest `json:"requests"`
		}
		var one geminiEmbedRequest
		var err error
		if c.ep == epGeminiBatchEmbed {
			err = json.Unmarshal(body, &batch)
		} else {
			err = json.Unmarshal(body, &one)
			batch.Requests = []geminiEmbedRequest{one}
		}
		switch {
		case err != nil:
			p.err = geminiInvalid("Invalid JSON payload received. " + err.Error())
		case len(batch.Requests) == 0:
			p.err = geminiInvalid("* BatchEmbedContentsRequest.requests: requests must not be empty")
		}
		for i, r := range batch.Requests {
			if c.ep == epGeminiBatchEmbed && strings.TrimPrefix(r.Model, "models/") != model {
				p.err = geminiInvalid("* BatchEmbedContentsRequest.requests[" + strconv.Itoa(i) + "].model: model must match the model of the path")
			}
		}
		p.gemEmbed = batch.Requests
		return p
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		p.err = geminiInvalid("Invalid JSON payload received. " + err.Error())
		return p
	}
	if req.GenerateContentRequest != nil {
		req = *req.GenerateContentRequest
	}
	req.model = model
	if len(req.Contents) == 0 && c.ep != epGeminiCount {
		p.err = geminiInvalid("* GenerateContentRequest.contents: contents is not specified")
	}
	p.gem = &req
	return p
}

// reply answers a generateContent request: the same words as the other
// protocols for the same conversation (the model's turns count as the
// assistant's), a function call as ToolWord says, thoughts when a thinking
// budget is set.
func (req *geminiRequest) reply() reply {
	cv := newConvo()
	if si := req.SystemInstruction; si != nil && len(si.Parts) > 0 {
		cv.message("system")
		for _, p := range si.Parts {
			cv.text(p.Text)
		}
	}
	asked := false
	for i, m := range req.Contents {
		role := m.Role
		if role == "model" {
			role = "assistant"
		}
		cv.message(role)
		last := i == len(req.Contents)-1 && m.Role != "model"
		for _, p := range m.Parts {
			switch {
			case p.FunctionResponse != nil:
				var out struct {
					Output json.RawMessage `json:"output"`
				}
				if json.Unmarshal(p.FunctionResponse.Response, &out) == nil {
					forEachText(out.Output, cv.text)
				}
			case !p.Thought:
				cv.text(p.Text)
				asked = asked || (last && askedForTool(p.Text))
			}
		}
	}
	var limit *int
	if g := req.GenerationConfig; g != nil {
		limit = g.MaxOutputTokens
	}
	r := replyFor(cv, limit)
	if g := req.GenerationConfig; g != nil && g.ThinkingConfig != nil && (g.ThinkingConfig.ThinkingBudget == nil || *g.ThinkingConfig.ThinkingBudget != 0) {
		r.thinking = thinkingWords
	}
	var tools []toolDef
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if len(schema) == 0 {
				schema = geminiSchema(f.Parameters)
			}
			tools = append(tools, toolDef{f.Name, schema})
		}
	}
	choice, named := "auto", ""
	if tc := req.ToolConfig; tc != nil {
		switch tc.FunctionCallingConfig.Mode {
		case "ANY":
			choice = "any"
			if len(tc.FunctionCallingConfig.AllowedFunctionNames) == 1 {
				named = tc.FunctionCallingConfig.AllowedFunctionNames[0]
			}
		case "NONE":
			choice = "none"
		}
	}
	r.tool = chooseTool(tools, choice, named, asked, r.seed)
	return r
}

// geminiSchema turns an OpenAPI-subset Schema (upper-case type names) into
// the JSON schema toolArgs reads.
func geminiSchema(s json.RawMessage) json.RawMessage {
	return json.RawMessage(strings.ToLower(string(s)))
}

// includeThoughts reports whether the answer shows its thoughts.
func (req *geminiRequest) includeThoughts() bool {
	g := req.GenerationConfig
	return g != nil && g.ThinkingConfig != nil && g.ThinkingConfig.IncludeThoughts
}

// geminiFinish is the finishReason of a reply: STOP, also for a function
// call, or MAX_TOKENS.
func (r *reply) geminiFinish() string {
	if r.tool == nil && r.finish == "length" {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// appendGeminiUsage appends a usageMetadata: with cachedContent, half the
// prompt (at least 1) is read from the cache, counted in the prompt too;
// the thoughts are counted apart from the candidates.
func appendGeminiUsage(b []byte, req *geminiRequest, r *reply) []byte {
	thoughts := r.thinking
	candidates := r.output() - thoughts
	b = append(b, `{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(r.prompt), 10)
	if req.CachedContent != "" {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(max(r.prompt/2, 1)), 10)
	}
	b = append(b, `,"candidatesTokenCount":`...)
	b = strconv.AppendInt(b, int64(candidates), 10)
	if thoughts > 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = strconv.AppendInt(b, int64(thoughts), 10)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(r.prompt+candidates+thoughts), 10)
	return append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`+strconv.Itoa(r.prompt)+`}]}`...)
}

// appendGeminiChunk appends one GenerateContentResponse whose only
// candidate has parts (a JSON list's inside); finish, when set, ends it
// with the usage.
func appendGeminiChunk(b []byte, req *geminiRequest, r *reply, parts []byte, finish bool, id []byte) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	b = append(b, parts...)
	b = append(b, `],"role":"model"}`...)
	if finish {
		b = append(b, `,"finishReason":"`...)
		b = append(b, r.geminiFinish()...)
		b = append(b, '"')
	}
	b = append(b, `,"index":0}]`...)
	if finish {
		b = append(b, `,"usageMetadata":`...)
		b = appendGeminiUsage(b, req, r)
	}
	b = append(b, `,"modelVersion":`...)
	b = appendString(b, req.model)
	b = append(b, `,"responseId":"`...)
	b = append(b, id...)
	return append(b, `"}`...)
}

// appendTextPart appends a text part; thought marks a thought.
func appendTextPart(b []byte, text string, thought bool) []byte {
	b = append(b, `{"text":`...)
	b = appendString(b, text)
	if thought {
		b = append(b, `,"thought":true`...)
	}
	return append(b, '}')
}

// appendCallPart appends a functionCall part, with its thought signature.
func appendCallPart(b []byte, r *reply) []byte {
	b = append(b, `{"functionCall":{"name":`...)
	b = appendString(b, r.tool.name)
	b = append(b, `,"args":`...)
	b = append(b, r.tool.args...)
	b = append(b, `},"thoughtSignature":"`...)
	b = append(b, opaque("Cq", r.seed, 42)...)
	return append(b, `"}`...)
}

// generate answers generateContent and streamGenerateContent.
func (c *call) generate(req *geminiRequest) {
	if c.b.Answer != "" {
		c.replaced()
		return
	}
	r := req.reply()
	text := c.text(&r)
	id := c.sim.appendID(nil, 20)
	if c.ep == epGeminiStream {
		c.geminiStream(req, &r, text, id)
		return
	}
	var parts []byte
	if r.thinking > 0 && req.includeThoughts() {
		parts = appendTextPart(parts, string(appendWords(nil, r.thinkingSeed(), r.thinking)), true)
	}
	switch {
	case r.tool != nil:
		if len(parts) > 0 {
			parts = append(parts, ',')
		}
		parts = appendCallPart(parts, &r)
	case len(text) > 0:
		if len(parts) > 0 {
			parts = append(parts, ',')
		}
		parts = appendTextPart(parts, text, false)
	}
	b := appendGeminiChunk(make([]byte, 0, 512+len(parts)), req, &r, parts, true, id)
	c.answerJSON(b, len(b)-1)
}

// geminiGarbled is a chunk cut short: not JSON.
const geminiGarbled = `{"candidates":[{"content":{"parts":[{"text":"`

// geminiStreamError is what Gemini sends when it fails after the 200.
const geminiStreamError = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`

// geminiStreamer writes one streamGenerateContent answer: as server-sent
// events (?alt=sse), or as one JSON array.
type geminiStreamer struct {
	*streamer
	sse  bool
	sent int // chunks sent
}

// frame is the framing of a chunk after sent others.
func (gs *geminiStreamer) frame(chunk string) string {
	switch {
	case gs.sse:
		return "data: " + chunk + "\n\n"
	case gs.sent == 0:
		return "[" + chunk
	}
	return ",\r\n" + chunk
}

// chunk sends one chunk.
func (gs *geminiStreamer) chunk(b []byte) bool {
	gs.buf = append(gs.buf[:0], gs.frame(string(b))...)
	gs.sent++
	return gs.send()
}

// geminiStream answers streamGenerateContent: the thoughts when shown, a
// chunk per word of text or one chunk with the whole function call (Gemini
// does not stream arguments), then a last chunk with an empty text, the
// finishReason and the usage. Content events, which the misbehaviours
// count, are the words or the call.
func (c *call) geminiStream(req *geminiRequest, r *reply, text string, id []byte) {
	sse := c.r.URL.Query().Get("alt") == "sse"
	var gs *geminiStreamer
	if sse {
		gs = &geminiStreamer{streamer: c.startStream(), sse: true}
	} else {
		h := c.header("application/json; charset=UTF-8")
		h["Cache-Control"] = []string{"no-cache"}
		c.writeHeader(http.StatusOK)
		gs = &geminiStreamer{streamer: &streamer{c: c, rc: http.NewResponseController(c.w), buf: make([]byte, 0, 512), first: true}}
	}
	var b []byte
	if r.thinking > 0 && req.includeThoughts() {
		part := appendTextPart(nil, string(appendWords(nil, r.thinkingSeed(), r.thinking)), true)
		if !gs.chunk(appendGeminiChunk(b, req, r, part, false, id)) {
			return
		}
	}
	var pieces []string
	if r.tool == nil {
		for rest := text; len(rest) > 0; {
			var piece string
			piece, rest = nextDelta(rest)
			pieces = append(pieces, piece)
		}
	}
	n := max(len(pieces), 1)
	for i := 1; i <= n; i++ {
		var part []byte
		if r.tool != nil {
			part = appendCallPart(nil, r)
		} else if len(pieces) > 0 {
			part = appendTextPart(nil, pieces[i-1], false)
		}
		if !gs.chunk(appendGeminiChunk(b[:0], req, r, part, false, id)) ||
			!gs.misbehave(i, n, gs.frame(geminiGarbled), gs.frame(geminiStreamError)) {
			return
		}
	}
	if gs.chunk(appendGeminiChunk(b[:0], req, r, []byte(`{"text":""}`), true, id)) && !gs.sse {
		gs.raw("]")
	}
}

// geminiCount answers countTokens: every prompt token.
func (c *call) geminiCount(req *geminiRequest) {
	r := req.reply()
	b := append([]byte(`{"totalTokens":`), strconv.Itoa(r.prompt)...)
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`+strconv.Itoa(r.prompt)+`}]}`...)
	c.respond(http.StatusOK, "application/json; charset=UTF-8", b)
}

// geminiEmbed answers embedContent ({"embedding":…}) and
// batchEmbedContents ({"embeddings":[…]}): a deterministic unit vector per
// content's text. Gemini reports no usage for embeddings.
func (c *call) geminiEmbed(reqs []geminiEmbedRequest) {
	b := []byte(`{"embeddings":[`)
	if c.ep == epGeminiEmbed {
		b = []byte(`{"embedding":`)
	}
	for i, r := range reqs {
		dims := geminiEmbedDimensions
		if r.OutputDimensionality != nil && *r.OutputDimensionality > 0 && *r.OutputDimensionality <= maxDimensions {
			dims = *r.OutputDimensionality
		}
		var text strings.Builder
		for _, p := range r.Content.Parts {
			text.WriteString(p.Text)
		}
		v := make([]float32, dims)
		embedInput{text: text.String()}.vector(v)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"values":[`...)
		for j, f := range v {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
		}
		b = append(b, "]}"...)
	}
	if c.ep == epGeminiBatchEmbed {
		b = append(b, ']')
	}
	c.respond(http.StatusOK, "application/json; charset=UTF-8", append(b, '}'))
}

// geminiModels answers GET /v1beta/models and GET /v1beta/models/{model}.
func (c *call) geminiModels() {
	models := c.sim.geminiModels
	if c.ep == epGeminiModels {
		b := []byte(`{"models":[`)
		for i, m := range models {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGeminiModel(b, m)
		}
		c.respond(http.StatusOK, "application/json; charset=UTF-8", append(b, "]}"...))
		return
	}
	id := strings.TrimPrefix(geminiModelOf(c.r), "models/")
	if c.sim.modelSet == nil || c.sim.modelSet[id] {
		c.respond(http.StatusOK, "application/json; charset=UTF-8", appendGeminiModel(nil, id))
		return
	}
	c.modelNotFound(id)
}

// appendGeminiModel appends a Model: embedding models embed, others
// generate.
func appendGeminiModel(b []byte, id string) []byte {
	methods := `["generateContent","streamGenerateContent","countTokens"]`
	if strings.Contains(id, "embedding") {
		methods = `["embedContent","batchEmbedContents"]`
	}
	b = append(b, `{"name":`...)
	b = appendString(b, "models/"+id)
	b = append(b, `,"version":"001","displayName":`...)
	b = appendString(b, id)
	b = append(b, `,"inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":`...)
	b = append(b, methods...)
	return append(b, '}')
}

// googleError renders Google's error envelope; details is a JSON list's
// inside, "" for none.
func googleError(status int, gstatus, msg, details string) []byte {
	b := make([]byte, 0, 128+len(msg)+len(details))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"status":"`...)
	b = append(b, gstatus...)
	b = append(b, '"')
	if details != "" {
		b = append(b, `,"details":[`...)
		b = append(b, details...)
		b = append(b, ']')
	}
	return append(b, "}}"...)
}

// geminiInvalid is a 400 INVALID_ARGUMENT found while parsing.
func geminiInvalid(msg string) *apiError {
	return &apiError{http.StatusBadRequest, googleError(http.StatusBadRequest, "INVALID_ARGUMENT", msg, "")}
}

// geminiKeyInvalid is Gemini's answer to a key that is not valid: a 400,
// with the reason API_KEY_INVALID.
var geminiKeyInvalid = googleError(http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
	`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}`)

// geminiMissingKey is Gemini's answer to a request without a key.
var geminiMissingKey = googleError(http.StatusForbidden, "PERMISSION_DENIED",
	"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", "")

// geminiRateLimited is Gemini's 429: RESOURCE_EXHAUSTED with the quota
// that ran out (a per-minute one) and the RetryInfo to wait; the message
// says "check your plan and billing" as Gemini's does for any quota.
func geminiRateLimited(model string, limit int, retryAfter time.Duration) []byte {
	if model == "" {
		model = "gemini-2.5-flash"
	}
	msg := "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
	details := `{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_requests",` +
		`"quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaDimensions":{"location":"global","model":` + string(appendString(nil, model)) +
		`},"quotaValue":"` + strconv.Itoa(limit) + `"}]}`
	if retryAfter > 0 {
		secs := strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)
		msg += " Please retry in " + secs + "s."
		details += `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + secs + `s"}`
	}
	return googleError(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", msg, details)
}

// geminiFailure is what Gemini answers with status (Behavior.FailStatus).
// It has no 402: an account that cannot pay is a 400 FAILED_PRECONDITION.
func geminiFailure(status int) (int, []byte) {
	switch status {
	case http.StatusPaymentRequired, http.StatusBadRequest:
		return http.StatusBadRequest, googleError(http.StatusBadRequest, "FAILED_PRECONDITION",
			"User location is not supported for the API use without a billing account linked.", "")
	case http.StatusForbidden:
		return status, googleError(status, "PERMISSION_DENIED", "The caller does not have permission", "")
	case http.StatusNotFound:
		return status, googleError(status, "NOT_FOUND", "Requested entity was not found.", "")
	case http.StatusServiceUnavailable:
		return status, googleError(status, "UNAVAILABLE", "The model is overloaded. Please try again later.", "")
	case http.StatusGatewayTimeout:
		return status, googleError(status, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", "")
	}
	return status, googleError(status, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", "")
}

// geminiModelNotFound is Gemini's 404 for a model it does not serve.
func geminiModelNotFound(model string) []byte {
	return googleError(http.StatusNotFound, "NOT_FOUND", "models/"+model+
		" is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", "")
}
