package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Google's Code Assist API, as Gemini CLI signed in with a Google account
// calls it: POST /v1internal:generateContent, :streamGenerateContent
// (?alt=sse) and :countTokens. The credential is a Google access token
// (Authorization: Bearer) that the token endpoint issued (for a refresh
// token: with the client secret when the client is one of
// RequireClientSecret), or a key set with SetKey. The body wraps a Gemini
// request: {"model", "project", "request": {…}}, a count's {"request":
// {"model": "models/{m}", "contents"}}; the answer wraps Gemini's as
// {"response": {…}, "traceId"}, and so does every streamed event's data. A
// count's answer, {"totalTokens"}, and errors are Gemini's as they are
// (Google's envelope). The request is recorded as it came
// (HostedRequests), then served as the Gemini API with that API's
// behaviour.

// codeAssistPrefix is the path of the Code Assist API's methods.
const codeAssistPrefix = "/v1internal:"

// codeAssistRequest is what the simulator reads of a Code Assist body.
type codeAssistRequest struct {
	Model   string          `json:"model"`
	Project string          `json:"project"`
	Request json.RawMessage `json:"request"`
}

// serveCodeAssist serves a Code Assist method.
func (s *Simulator) serveCodeAssist(w http.ResponseWriter, r *http.Request) {
	body, ok := s.hostedBody(w, r)
	if !ok {
		return
	}
	method := strings.TrimPrefix(r.URL.Path, codeAssistPrefix)
	if r.Method != http.MethodPost || method != "generateContent" && method != "streamGenerateContent" && method != "countTokens" {
		googleFailure(w, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	switch token := bearer(r); {
	case token == "":
		googleFailure(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	case !s.liveToken(token):
		googleFailure(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	default:
		r.Header.Del("Authorization")
		r.Header.Set("X-Goog-Api-Key", token)
	}
	var req codeAssistRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Request) == 0 || req.Request[0] != '{' {
		googleFailure(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received: a Code Assist request wraps a Gemini request in \"request\".")
		return
	}
	if method == "countTokens" {
		var count struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(req.Request, &count) // an object: it decodes
		model, ok := strings.CutPrefix(count.Model, "models/")
		if !ok || model == "" {
			googleFailure(w, http.StatusBadRequest, "INVALID_ARGUMENT", "request.model must be models/{model}.")
			return
		}
		s.native(w, r, "/v1beta/models/"+model+":countTokens", "", req.Request)
		return
	}
	switch {
	case req.Model == "":
		googleFailure(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model is required.")
		return
	case req.Project == "":
		googleFailure(w, http.StatusBadRequest, "INVALID_ARGUMENT", "project is required.")
		return
	}
	cw := &codeAssistWriter{ResponseWriter: w, stream: method == "streamGenerateContent", traceID: randomHex()[:16]}
	s.native(cw, r, "/v1beta/models/"+req.Model+":"+method, r.URL.RawQuery, req.Request)
	cw.finish()
}

// liveToken reports whether token may call Code Assist: an access token the
// token endpoint issued that has not expired, or a key set with SetKey.
func (s *Simulator) liveToken(token string) bool {
	s.oauth.mu.Lock()
	expires, refreshed := s.oauth.access[token]
	s.oauth.mu.Unlock()
	if refreshed {
		return time.Now().Before(expires)
	}
	return s.cloudToken(token)
}

// googleFailure answers an error in Google's envelope.
func googleFailure(w http.ResponseWriter, status int, gstatus, msg string) {
	b := googleError(status, gstatus, msg, "")
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// codeAssistWriter puts the Gemini API's 2xx answer in Code Assist's
// envelope as it is written: a whole answer when it is complete (finish),
// each data line of a stream as it arrives (an error event's as it is).
// Error answers pass as they are. Flush and Unwrap keep what the Gemini
// API's streams do with a ResponseController (flush, cut) working.
type codeAssistWriter struct {
	http.ResponseWriter
	stream  bool
	traceID string
	status  int    // 0 until the header is written
	held    []byte // a whole answer, or a stream's line not yet ended
}

func (cw *codeAssistWriter) WriteHeader(status int) {
	cw.status = status
	if status/100 == 2 && !cw.stream {
		return // sent by finish, with the envelope's length
	}
	if status/100 == 2 {
		cw.Header().Del("Content-Length")
	}
	cw.ResponseWriter.WriteHeader(status)
}

func (cw *codeAssistWriter) Write(b []byte) (int, error) {
	if cw.status == 0 {
		cw.WriteHeader(http.StatusOK)
	}
	switch {
	case cw.status/100 != 2:
		return cw.ResponseWriter.Write(b)
	case !cw.stream:
		cw.held = append(cw.held, b...)
		return len(b), nil
	}
	cw.held = append(cw.held, b...)
	var out []byte
	rest := cw.held
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		out = cw.line(out, rest[:i+1])
		rest = rest[i+1:]
	}
	cw.held = cw.held[:copy(cw.held, rest)] // the line not yet ended
	if _, err := cw.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// line appends a stream's line to out, its data in the envelope.
func (cw *codeAssistWriter) line(out, line []byte) []byte {
	data, ok := bytes.CutPrefix(line, []byte("data: "))
	if !ok || bytes.HasPrefix(data, []byte(`{"error"`)) {
		return append(out, line...)
	}
	end := len(bytes.TrimRight(data, "\r\n"))
	out = append(out, `data: {"response":`...)
	out = append(out, data[:end]...)
	out = append(out, `,"traceId":"`...)
	out = append(out, cw.traceID...)
	out = append(out, `"}`...)
	return append(out, data[end:]...)
}

func (cw *codeAssistWriter) Flush() {
	if f, ok := cw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (cw *codeAssistWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// finish sends a whole 2xx answer in the envelope.
func (cw *codeAssistWriter) finish() {
	if cw.stream || cw.status/100 != 2 {
		return
	}
	b := make([]byte, 0, len(cw.held)+48)
	b = append(b, `{"response":`...)
	b = append(b, cw.held...)
	b = append(b, `,"traceId":"`...)
	b = append(b, cw.traceID...)
	b = append(b, `"}`...)
	cw.Header().Set("Content-Length", strconv.Itoa(len(b)))
	cw.ResponseWriter.WriteHeader(cw.status)
	cw.ResponseWriter.Write(b)
}
