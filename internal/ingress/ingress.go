// Package ingress is the HTTP surface of the data plane: the path
// allowlist, authentication of the caller's key from the headers (before a
// byte of the body is read), body size limits and the server-wide budget of
// bodies held, request IDs, parsing of what routing needs, error envelopes
// in the caller's protocol, and the one access log line per request. It
// hands each request to pipeline.Handler and must not be imported by any
// stage.
package ingress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
)

// Server is the data-plane http.Handler.
type Server struct {
	handler *pipeline.Handler
	live    *pipeline.Live
	keys    *authn.Keyring
	metrics *metrics.Metrics
	log     *slog.Logger
	mux     *http.ServeMux
	ids     *requestIDs
	budget  bodyBudget
	fronts  map[sluice.Protocol]*Front
	// throttle counts failed keys per client address (authenticate).
	throttle *authn.Throttle
}

// New returns the data-plane handler, serving the protocols of fronts.
func New(h *pipeline.Handler, live *pipeline.Live, keys *authn.Keyring, m *metrics.Metrics, log *slog.Logger, fronts []*Front) *Server {
	s := &Server{handler: h, live: live, keys: keys, metrics: m, log: log, mux: http.NewServeMux(), ids: newRequestIDs(),
		fronts: make(map[sluice.Protocol]*Front, len(fronts)), throttle: authn.NewThrottle(failedKeys, failedKeyRefill, nil)}
	m.WatchBodyBytesHeld(s.budget.held.Load)
	for _, f := range fronts {
		s.fronts[f.Protocol] = f
		for _, path := range f.Paths {
			s.mux.HandleFunc("POST "+path, s.endpoint(f.Protocol, s.serve))
		}
		if f.CountPath != "" {
			s.mux.HandleFunc("POST "+f.CountPath, s.endpoint(f.Protocol, s.serveCount))
		}
	}
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.routeJobs()
	s.routeResponses()
	s.routeGemini()
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return s
}

// ServeHTTP routes by the path allowlist; anything else is a 404 (or 405)
// in the OpenAI envelope, or Anthropic's under /v1/messages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		code, p := sluice.CodeNotFound, sluice.ProtocolOpenAIChat
		switch {
		case strings.HasPrefix(r.URL.Path, anthropic.Path):
			p = sluice.ProtocolAnthropic
		case strings.HasPrefix(r.URL.Path, "/v1beta/") || googleCaller(r):
			p = sluice.ProtocolGemini
		}
		if s.servedForAnotherMethod(r) {
			code = sluice.CodeMethodNotAllowed
		}
		s.writeError(w, p, asError(closeUnread(w, r, &sluice.Error{Code: code, Msg: "unknown path " + r.Method + " " + r.URL.Path})))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// servedForAnotherMethod reports whether the mux serves r's path for some
// other method: the answer is then a 405, not a 404. Asking the mux itself
// keeps one list of paths, the routes.
func (s *Server) servedForAnotherMethod(r *http.Request) bool {
	probe := *r
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); m != r.Method && pattern != "" {
			return true
		}
	}
	return false
}

// serveFunc serves one request of protocol p with its request ID, received
// at start; req is nil when the request did not parse.
type serveFunc func(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error)

// endpoint wraps serve with what every data-plane request gets: a request
// ID, and the error rendering, access log line and metrics of finish.
func (s *Server) endpoint(p sluice.Protocol, serve serveFunc) http.HandlerFunc {
	idHeader := s.fronts[p].IDHeader
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &recorder{ResponseWriter: w}
		id := s.ids.next()
		h := w.Header()
		h.Set("X-Request-Id", id)
		if idHeader != "" {
			h[idHeader] = h["X-Request-Id"] // one value, shared: nobody appends to it
		}
		out, req, err := serve(rw, r, p, id, start)
		s.finish(r.Context(), rw, req, p, out, err, start, id)
	}
}

func (s *Server) serve(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	return s.serveRequest(w, r, p, id, start, nil)
}

// serveCount serves a token count (Anthropic's count_tokens) as a request
// of the alias like any other: an Anthropic upstream counts, and an
// upstream of another protocol, which has no count, is not called: the
// answer is Sluice's own estimate of the prompt (upstream.Caller).
func (s *Server) serveCount(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	return s.serveRequest(w, r, p, id, start, counting)
}

// counting makes req a token count: nothing is generated or billed, so no
// tokens are reserved.
func counting(req *sluice.Request) error {
	req.CountTokens, req.Stream, req.MaxTokens, req.Output = true, false, 0, 0
	return nil
}

// serveRequest serves a request of the alias it names (in its body, or
// Gemini's path); op, when not nil, makes it the operation its path asks
// for (a count, a compaction).
func (s *Server) serveRequest(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time, op func(*sluice.Request) error) (out pipeline.Outcome, req *sluice.Request, err error) {
	defer s.recoverPanic(r.Context(), id, &err)
	f := s.fronts[p]
	pr, err := s.authenticate(r, f.Key(r))
	if err != nil {
		return out, nil, closeUnread(w, r, err)
	}
	out.KeyID = pr.Key.ID
	body, held, err := s.readBody(w, r, s.live.Load())
	defer s.budget.give(held)
	if err != nil {
		return out, nil, err
	}
	if req, err = f.read(r, body); err != nil {
		return out, nil, err
	}
	req.ID, req.Received, req.Header = id, start, r.Header
	if op != nil {
		if err = op(req); err != nil {
			return out, req, err
		}
	}
	if err = sluiceHeaders(req, r); err != nil {
		return out, req, err
	}
	out, err = s.handler.Serve(r.Context(), w, req, pr)
	return out, req, err
}

// sluiceHeaders sets what a caller may say in Sluice's own headers: the
// priority class, the task type, the quota profile (which the pipeline
// takes only from a key that may assert it), the longest wait for
// capacity, strict translation, and the end user (over the body's "user",
// and checked as it is).
func sluiceHeaders(req *sluice.Request, r *http.Request) error {
	req.Priority, req.Task = r.Header.Get("X-Sluice-Priority"), r.Header.Get("X-Sluice-Task")
	req.Profile = r.Header.Get("X-Sluice-Profile")
	switch r.Header.Get("X-Sluice-Translation") {
	case "":
	case "strict":
		req.StrictTranslation = true
	default:
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "X-Sluice-Translation must be strict (or left out, to have hints the upstream's protocol cannot carry dropped and named in X-Sluice-Dropped)"}
	}
	if v := r.Header.Get("X-Sluice-Max-Wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "X-Sluice-Max-Wait must be 0 or a duration such as 500ms or 2s"}
		}
		req.MaxWait = &d
	}
	if u := r.Header.Get("X-Sluice-User"); u != "" {
		req.User = u
		return checkUser(u)
	}
	return nil
}

// recoverPanic turns a panic of the request id into an internal error in
// *err, logged with its stack. Call it deferred.
func (s *Server) recoverPanic(ctx context.Context, id string, err *error) {
	if v := recover(); v != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "panic serving request", slog.String("request_id", id),
			slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
		*err = &sluice.Error{Code: sluice.CodeInternal, Msg: "internal error"}
	}
}

// finish renders an uncommitted error, writes the access log line and
// counts the request.
func (s *Server) finish(ctx context.Context, w *recorder, req *sluice.Request, p sluice.Protocol, out pipeline.Outcome, err error, start time.Time, id string) {
	code := "ok"
	gone := errors.Is(err, context.Canceled) && ctx.Err() != nil
	switch {
	case gone:
		code = "caller_gone"
	case err != nil && !w.wrote:
		se := asError(err)
		s.writeError(w, p, se)
		code = string(se.Code)
	case w.status >= 400:
		code = "upstream_" + strconv.Itoa(w.status)
	}
	status := w.status
	if gone && !w.wrote {
		status = 499 // the caller left before any answer
	}
	d := time.Since(start)
	attrs := []slog.Attr{
		slog.String("request_id", id), slog.String("protocol", string(p)), slog.Int("status", status),
		slog.String("code", code), slog.Duration("duration", d), slog.String("key_id", out.KeyID),
		slog.Int("executions", len(out.Executions)),
	}
	if req != nil {
		attrs = append(attrs, slog.String("model", req.Model), slog.Bool("stream", req.Stream),
			slog.Int64("prompt_tokens", out.Usage.PromptTokens), slog.Int64("completion_tokens", out.Usage.CompletionTokens))
	}
	if err != nil && code != "ok" {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
	s.metrics.Requests.WithLabelValues(string(p), code).Inc()
	stream := "false"
	if req != nil && req.Stream {
		stream = "true"
	}
	s.metrics.RequestDuration.WithLabelValues(string(p), stream).Observe(d.Seconds())
	if req != nil && out.Usage.Measured {
		s.metrics.Tokens.WithLabelValues(req.Model, "prompt").Add(float64(out.Usage.PromptTokens))
		s.metrics.Tokens.WithLabelValues(req.Model, "completion").Add(float64(out.Usage.CompletionTokens))
	}
}

// models lists the aliases the key may use through OpenAI's protocols, in
// OpenAI's list shape; a Google client's GET /v1/models is Gemini's list
// (geminiModels), an Anthropic client's Anthropic's (anthropicModels).
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	switch {
	case googleCaller(r):
		s.geminiModels(w, r)
	case anthropicCaller(r):
		s.anthropicModels(w, r, "")
	default:
		s.openAIModel(w, r, "")
	}
}

// openAIProtocols are the protocols OpenAI's model list shows.
var openAIProtocols = []sluice.Protocol{sluice.ProtocolOpenAIChat, sluice.ProtocolOpenAIResponses, sluice.ProtocolOpenAIEmbeddings, sluice.ProtocolOpenAIVideos}

// openAIModel is OpenAI's GET /v1/models (id "") or GET /v1/models/{id}:
// the aliases the key may use through OpenAI's protocols (its aliases, on
// its paths), or one of them (404 model_not_found for another).
func (s *Server) openAIModel(w http.ResponseWriter, r *http.Request, id string) {
	p, err := s.authenticate(r, bearer(r))
	if err != nil {
		s.writeError(w, sluice.ProtocolOpenAIChat, asError(closeUnread(w, r, err)))
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	snap := s.live.Load()
	routes, k := snap.Routes, snap.ScopedKey(p.Key)
	for _, name := range routes.Names() {
		if callable(k, routes.Alias(name), openAIProtocols...) && (id == "" || id == name) {
			list.Data = append(list.Data, model{ID: name, Object: "model", OwnedBy: "sluice"})
		}
	}
	switch {
	case id == "":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	case len(list.Data) == 0:
		s.writeError(w, sluice.ProtocolOpenAIChat, &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "The model `" + id + "` does not exist or you do not have access to it."})
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list.Data[0])
	}
}

func asError(err error) *sluice.Error {
	if se, ok := errors.AsType[*sluice.Error](err); ok {
		return se
	}
	return &sluice.Error{Code: sluice.CodeInternal, Msg: "internal error", Err: err}
}

// writeError renders e in the error envelope of protocol p (OpenAI's for a
// protocol Sluice does not serve). Only e.Msg and e.Code reach the caller;
// the cause stays in the logs.
func (s *Server) writeError(w http.ResponseWriter, p sluice.Protocol, e *sluice.Error) {
	status := e.Code.Status()
	f := s.fronts[p]
	if f == nil {
		f = OpenAIChat
	}
	body := f.Envelope(e, status)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
		h.Set("X-Sluice-Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// recorder remembers what was written so an error is rendered only when
// nothing was, and the access log knows the status.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection to flush.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// requestIDs hands out unique request IDs cheaply: a random per-process
// prefix and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: "req_" + hex.EncodeToString(b[:])}
}

func (g *requestIDs) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 36)
}

// An address may present failedKeys wrong keys at once, and one more each
// failedKeyRefill; past that its wrong keys are answered 429.
const (
	failedKeys      = 20
	failedKeyRefill = 3 * time.Second
)

// authenticate maps the key r presents (token) to its principal, on every
// path, the model lists included. A wrong key from an address that
// presented too many already is answered 429 access_auth_throttled with a
// Retry-After instead of 401, so a client looping on a bad key is told to
// back off; a good key from that address still serves.
func (s *Server) authenticate(r *http.Request, token string) (*sluice.Principal, error) {
	p, err := s.keys.Authenticate(token)
	if err == nil {
		return p, nil
	}
	if !errors.Is(err, &sluice.Error{Code: sluice.CodeNoCredentials}) {
		return nil, err // not a wrong key (the key store is stale): nothing to throttle
	}
	source := authn.Source(r)
	if wait, refused := s.throttle.Refused(source); refused {
		return nil, &sluice.Error{Code: sluice.CodeAuthThrottled, RetryAfter: wait, Err: err,
			Msg: "too many requests with a wrong key from this address; retry after the Retry-After"}
	}
	s.throttle.Failed(source)
	return nil, err
}
