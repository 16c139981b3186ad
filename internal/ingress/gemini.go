package ingress

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// The Gemini fronts serve Gemini CLI and Google's SDKs: a model's methods
// at POST /v1beta/models/{model}:{method}, and at /v1/models/{model}:…
// (where @google/genai posts, beside OpenAI's GET /v1/models), the model
// and the method in the path; the key in x-goog-api-key, ?key= or as a
// bearer token; errors in Google's envelope. generateContent,
// streamGenerateContent and countTokens are gemini.generate;
// embedContent and batchEmbedContents gemini.embed (routeGemini).
var (
	GeminiGenerate = &Front{Protocol: sluice.ProtocolGemini, Key: geminiKey, Envelope: gemini.Envelope, Read: readGemini}
	GeminiEmbed    = &Front{Protocol: sluice.ProtocolGeminiEmbed, Key: geminiKey, Envelope: gemini.Envelope, Read: readGemini}
)

// routeGemini serves the Gemini fronts' paths: a model's methods, and the
// model list and a model, whose paths under /v1 are OpenAI's too.
func (s *Server) routeGemini() {
	if s.fronts[sluice.ProtocolGemini] == nil {
		return
	}
	serve := map[sluice.Protocol]http.HandlerFunc{sluice.ProtocolGemini: s.endpoint(sluice.ProtocolGemini, s.serveGemini)}
	if s.fronts[sluice.ProtocolGeminiEmbed] != nil {
		serve[sluice.ProtocolGeminiEmbed] = s.endpoint(sluice.ProtocolGeminiEmbed, s.serveGemini)
	}
	call := func(w http.ResponseWriter, r *http.Request) {
		_, method := geminiCall(r)
		if h := serve[gemini.Methods[method]]; h != nil {
			h(w, r)
			return
		}
		s.writeError(w, sluice.ProtocolGemini, asError(closeUnread(w, r,
			&sluice.Error{Code: sluice.CodeNotFound, Msg: "unknown path " + r.Method + " " + r.URL.Path})))
	}
	for _, v := range gemini.Versions {
		s.mux.HandleFunc("POST "+v+"/models/{call}", call)
	}
	s.mux.HandleFunc("GET /v1beta/models", s.geminiModels)
	s.mux.HandleFunc("GET /v1beta/models/{call}", s.geminiModels)
	s.mux.HandleFunc("GET /v1/models/{call}", s.geminiModels)
}

// geminiCall splits a model's path segment, "{model}:{method}", at its
// last colon.
func geminiCall(r *http.Request) (model, method string) {
	call := r.PathValue("call")
	i := strings.LastIndexByte(call, ':')
	if i < 0 {
		return call, ""
	}
	return call[:i], call[i+1:]
}

// serveGemini serves a model's method. A stream asked for without
// ?alt=sse is answered as Gemini does then, as one JSON array written
// element by element (jsonArrayWriter); whatever the caller asked, the
// upstream is asked for events.
func (s *Server) serveGemini(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	if _, method := geminiCall(r); method == gemini.MethodStream && r.URL.Query().Get("alt") != "sse" {
		array := &jsonArrayWriter{ResponseWriter: w.ResponseWriter}
		w.ResponseWriter = array
		defer array.close()
	}
	return s.serveRequest(w, r, p, id, start, nil)
}

// geminiKey returns the key of an x-goog-api-key header (how Google's SDKs
// send it), else of the ?key= query parameter, else a bearer token.
func geminiKey(r *http.Request) string {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if k := r.URL.Query().Get("key"); k != "" {
		return k
	}
	return bearer(r)
}

// readGemini reads a request of a Gemini front: its model and what it asks
// from its path (the model may be written models/{model}, as the API takes
// it), and from its body, which must be one JSON object, the output it
// asks for (generationConfig.maxOutputTokens). A stream of more than one
// candidate is refused (readGeminiBody). A batch of embeddings must
// name the path's model in each of its requests, as the API requires, so
// what the upstream runs is what Sluice admitted.
func readGemini(r *http.Request, body []byte) (*sluice.Request, error) {
	model, method := geminiCall(r)
	model = strings.TrimPrefix(model, "models/")
	if err := checkModel(model); err != nil {
		return nil, err
	}
	p := gemini.Methods[method]
	req := &sluice.Request{Protocol: p, Model: model, Body: body, Stream: method == gemini.MethodStream, Batch: method == gemini.MethodBatchEmbed}
	f, err := readGeminiBody(body, req.Batch, req.Stream, model)
	if err != nil {
		return nil, err
	}
	req.MaxTokens = f.MaxTokens
	req.Text, req.Output = sluice.MeasureText(body), f.output(p)
	if method == gemini.MethodCount {
		_ = counting(req)
	}
	return req, nil
}

// geminiRead is what readGemini reads of a body, whose member names
// Google's JSON reader takes in lowerCamelCase or snake_case alike: each
// name's spellings are its lower case without underscores (geminiName).
const (
	geminiGenerationConfig = "generationconfig"
	geminiMaxOutputTokens  = "maxoutputtokens"
	geminiCandidateCount   = "candidatecount"
	geminiRequests         = "requests"
	geminiModel            = "model"
)

// readGeminiBody reads the members of body that Sluice acts on. Each must
// appear once, in one spelling: two that Google's reader could take for
// the same (generationConfig and generation_config) are refused, as Parse
// refuses a repeated model, so that Sluice reads what the upstream reads.
//
// A stream (stream) of more than one candidate (generationConfig.
// candidateCount) is refused: each candidate ends with a finishReason of
// its own, in a chunk whose place Gemini's documentation does not give (nor whether the
// others' ends share it), and Sluice reads a Gemini stream's end from one
// chunk (upstream.GeminiGenerate), so it would end the stream at the first
// candidate to finish and cut the others. Gemini 3 models refuse more than
// one candidate anyway; a whole answer carries them all.
func readGeminiBody(body []byte, batch, stream bool, model string) (f fields, err error) {
	var config, requests []byte
	err = geminiMembers(body, func(name string, value []byte) error {
		switch name {
		case geminiGenerationConfig:
			return once(&config, value, "generationConfig")
		case geminiRequests:
			return once(&requests, value, "requests")
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	if len(config) > 0 && config[0] == '{' {
		var max, candidates []byte
		if err := geminiMembers(config, func(name string, value []byte) error {
			switch name {
			case geminiMaxOutputTokens:
				return once(&max, value, "generationConfig.maxOutputTokens")
			case geminiCandidateCount:
				return once(&candidates, value, "generationConfig.candidateCount")
			}
			return nil
		}); err != nil {
			return f, err
		}
		if max != nil && (json.Unmarshal(max, &f.MaxTokens) != nil || f.MaxTokens < 0) {
			return f, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "generationConfig.maxOutputTokens must be a non-negative integer"}
		}
		// A number, or a string of one as protobuf's JSON takes an int32;
		// anything else is the upstream's to refuse.
		var n json.Number
		if stream && candidates != nil && json.Unmarshal(candidates, &n) == nil {
			if c, err := n.Float64(); err == nil && c > 1 {
				return f, &sluice.Error{Code: sluice.CodeInvalidRequest,
					Msg: "generationConfig.candidateCount above 1 is not supported on streamGenerateContent: ask generateContent for several candidates"}
			}
		}
	}
	if batch {
		return f, checkBatchModels(requests, model)
	}
	return f, nil
}

// checkBatchModels refuses a batch of embeddings that is not a list of
// objects each naming model (as models/{model} or {model}) or none.
func checkBatchModels(requests []byte, model string) error {
	var list []json.RawMessage
	if len(requests) == 0 || json.Unmarshal(requests, &list) != nil {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "requests must be a list of embedContent requests"}
	}
	for i, item := range list {
		var named []byte
		err := geminiMembers(item, func(name string, value []byte) error {
			if name == geminiModel {
				return once(&named, value, "requests["+strconv.Itoa(i)+"].model")
			}
			return nil
		})
		if err != nil {
			return err
		}
		var m string
		if named != nil && (json.Unmarshal(named, &m) != nil || strings.TrimPrefix(m, "models/") != model) {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "requests[" + strconv.Itoa(i) + "].model must be models/" + model + ", the model of the path"}
		}
	}
	return nil
}

// once keeps the first value of a member in *dst and refuses a second.
func once(dst *[]byte, value []byte, field string) error {
	if *dst != nil {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: (&ambiguousError{field: field}).Error()}
	}
	*dst = value
	return nil
}

// geminiMembers calls fn with the folded name (geminiName) and the raw
// value of every member of obj, which must be one well-formed JSON object.
func geminiMembers(obj []byte, fn func(name string, value []byte) error) error {
	err := jsonfield.Members(obj, func(key, value []byte) error { return fn(geminiName(key), value) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonfield.ErrNotObject):
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "request body must be a JSON object"}
	}
	if se, ok := errors.AsType[*sluice.Error](err); ok {
		return se
	}
	return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "request body is not valid JSON", Err: err}
}

// geminiName folds a member's key as Google's JSON reader matches names,
// leniently: escapes undone and case folded (jsonfield.FoldKey), and
// underscores dropped, so lowerCamelCase and snake_case meet. Keys of the
// usual kind (ASCII, no escapes) are folded without FoldKey's allocation
// when they are not among the names read.
func geminiName(key []byte) string {
	var buf [len(geminiGenerationConfig)]byte
	n := 0
	for _, c := range key {
		switch {
		case c == '\\' || c >= 0x80:
			return strings.ReplaceAll(jsonfield.FoldKey(key), "_", "")
		case c == '_':
			continue
		case n == len(buf):
			return "" // longer than every name read
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case geminiGenerationConfig, geminiMaxOutputTokens, geminiCandidateCount, geminiRequests, geminiModel:
		return string(buf[:n]) // the constant: no allocation
	}
	return ""
}

// geminiModelEntry is one entry of Google's model list.
type geminiModelEntry struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	OutputTokenLimit           int64    `json:"outputTokenLimit,omitempty"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

// googleCaller reports whether a GET of /v1/models or /v1/models/{model},
// paths both APIs have, is a Google client's: its key in x-goog-api-key
// or ?key=, or Google's client header. An OpenAI client sends none.
func googleCaller(r *http.Request) bool {
	return r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("X-Goog-Api-Client") != "" || r.URL.Query().Has("key")
}

// geminiModels lists the aliases of the Gemini protocols the key may use,
// in Google's list shape (GET …/models), or shows one (GET …/models/{model},
// 404 NOT_FOUND for another). A GET under /v1 that is not a Google
// client's is OpenAI's.
func (s *Server) geminiModels(w http.ResponseWriter, r *http.Request) {
	call := r.PathValue("call")
	if strings.HasPrefix(r.URL.Path, "/v1/") && !googleCaller(r) {
		if anthropicCaller(r) {
			s.anthropicModels(w, r, call)
		} else {
			s.openAIModel(w, r, call)
		}
		return
	}
	p, err := s.authenticate(r, geminiKey(r))
	if err != nil {
		s.writeError(w, sluice.ProtocolGemini, asError(closeUnread(w, r, err)))
		return
	}
	want := strings.TrimPrefix(call, "models/")
	list := []geminiModelEntry{}
	snap := s.live.Load()
	routes, k := snap.Routes, snap.ScopedKey(p.Key)
	for _, name := range routes.Names() {
		a := routes.Alias(name)
		var methods []string
		for _, gp := range geminiProtocols {
			if callable(k, a, gp) {
				methods = append(methods, gemini.ModelMethods[gp]...)
			}
		}
		if methods == nil || want != "" && name != want {
			continue
		}
		list = append(list, geminiModelEntry{Name: "models/" + name, BaseModelID: name, Version: "sluice", DisplayName: name,
			OutputTokenLimit: a.MaxOutputTokens, SupportedGenerationMethods: methods})
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case want == "":
		_ = json.NewEncoder(w).Encode(map[string]any{"models": list})
	case len(list) == 0:
		s.writeError(w, sluice.ProtocolGemini, &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "models/" + want + " is not found"})
	default:
		_ = json.NewEncoder(w).Encode(list[0])
	}
}

// geminiProtocols are the protocols Gemini's model list shows, in the
// order of their methods.
var geminiProtocols = []sluice.Protocol{sluice.ProtocolGemini, sluice.ProtocolGeminiEmbed}

// callable reports whether key k may call alias a through one of the
// protocols: one of its aliases, answering the protocol, on one of its
// paths.
func callable(k *sluice.Key, a *sluice.Alias, through ...sluice.Protocol) bool {
	if !k.Allows(a.Name) {
		return false
	}
	for _, p := range through {
		if _, may := k.MayCall(p, false); a.Answers(p) && may {
			return true
		}
	}
	return false
}
