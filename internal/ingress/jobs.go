package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// The async job endpoints. OpenAI Videos lives where the SDKs expect it;
// the fal queue under /fal/, so that a fal client's base URL can point at
// Sluice: POST /fal/{alias} submits, and the follow-ups are the URLs the
// submit answer gives (/fal/requests/{id}[/status|/cancel]); any path
// ending that way is accepted, as fal clients also build them from the
// app's root (/fal/{owner}/{app}/requests/{id}/status).
func (s *Server) routeJobs() {
	videos, fal := s.endpoint(sluice.ProtocolOpenAIVideos, s.serveJob), s.endpoint(sluice.ProtocolFalQueue, s.serveJob)
	s.mux.HandleFunc("POST /v1/videos", videos)
	s.mux.HandleFunc("GET /v1/videos/{id}", videos)
	s.mux.HandleFunc("GET /v1/videos/{id}/content", videos)
	s.mux.HandleFunc("DELETE /v1/videos/{id}", videos)
	s.mux.HandleFunc("POST /fal/{path...}", fal)
	s.mux.HandleFunc("GET /fal/{path...}", fal)
	s.mux.HandleFunc("PUT /fal/{path...}", fal)
}

// jobTarget is what a job endpoint's path and method ask for.
type jobTarget struct {
	submit bool
	alias  string // fal submit: the model alias is the path
	job    string // follow-up: Sluice's job ID
	op     pipeline.JobOp
}

func target(r *http.Request, p sluice.Protocol) (jobTarget, bool) {
	if p == sluice.ProtocolOpenAIVideos {
		id := r.PathValue("id")
		switch {
		case r.Method == http.MethodPost:
			return jobTarget{submit: true}, true
		case r.Method == http.MethodDelete:
			return jobTarget{job: id, op: pipeline.JobCancel}, true
		case strings.HasSuffix(r.URL.Path, "/content"):
			return jobTarget{job: id, op: pipeline.JobResult}, true
		}
		return jobTarget{job: id, op: pipeline.JobStatus}, true
	}
	path := r.PathValue("path")
	i := strings.LastIndex("/"+path, "/requests/")
	if i < 0 {
		return jobTarget{submit: true, alias: path}, r.Method == http.MethodPost
	}
	id, tail, _ := strings.Cut(path[i+len("requests/"):], "/")
	switch {
	case id == "":
		return jobTarget{}, false
	case r.Method == http.MethodGet && tail == "":
		return jobTarget{job: id, op: pipeline.JobResult}, true
	case r.Method == http.MethodGet && tail == "status":
		return jobTarget{job: id, op: pipeline.JobStatus}, true
	case r.Method == http.MethodPut && tail == "cancel":
		return jobTarget{job: id, op: pipeline.JobCancel}, true
	}
	return jobTarget{}, false
}

// serveJob serves a job endpoint: a submit, or a follow-up of a job.
func (s *Server) serveJob(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	defer s.recoverPanic(r.Context(), id, &err)
	req = &sluice.Request{ID: id, Protocol: p, Received: start}
	t, ok := target(r, p)
	if !ok {
		return out, req, closeUnread(w, r, &sluice.Error{Code: sluice.CodeNotFound, Msg: "unknown path " + r.Method + " " + r.URL.Path})
	}
	pr, err := s.authenticate(r, s.fronts[p].Key(r))
	if err != nil {
		return out, req, closeUnread(w, r, err)
	}
	out.KeyID = pr.Key.ID
	var ans *pipeline.JobAnswer
	if t.submit {
		var body []byte
		var held int64
		body, held, err = s.readBody(w, r, s.live.Load())
		defer s.budget.give(held)
		if err != nil {
			return out, req, err
		}
		if err = parseSubmit(req, body, r.Header.Get("Content-Type"), t.alias); err != nil {
			return out, req, err
		}
		if err = sluiceHeaders(req, r); err != nil {
			return out, req, err
		}
		ans, out, err = s.handler.SubmitJob(r.Context(), req, pr)
	} else {
		ans, out, err = s.handler.FollowJob(r.Context(), pr, req, t.job, t.op, r.URL.RawQuery)
		if ans != nil {
			req.Model = ans.Job.Alias // for the access log
		}
	}
	if err != nil {
		return out, req, err
	}
	return out, req, renderJob(w, r, p, ans)
}

// jobToken returns the virtual key of a job request: a bearer token, or the
// "Authorization: Key …" fal clients send.
func jobToken(r *http.Request) string {
	if token := bearer(r); token != "" {
		return token
	}
	if h := r.Header.Get("Authorization"); len(h) > 4 && strings.EqualFold(h[:4], "key ") {
		return strings.TrimSpace(h[4:])
	}
	return ""
}

// parseSubmit fills req from a submit body: an OpenAI video request names
// its model, in JSON or in a multipart form (as the OpenAI SDKs send it,
// with the reference image as a file); a fal body is the model's input, a
// JSON object, and the model is the path. Job submits reserve no tokens: a
// video is not priced in them.
func parseSubmit(req *sluice.Request, body []byte, contentType, alias string) error {
	if req.Protocol == sluice.ProtocolFalQueue {
		if alias == "" {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "the path must name a model: POST /fal/{model}"}
		}
		if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' || !json.Valid(b) {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "request body must be a JSON object (the model input)"}
		}
		req.Model, req.Body = alias, body
		return nil
	}
	if mt, params, err := mime.ParseMediaType(contentType); err == nil && mt == "multipart/form-data" {
		model, err := formValue(body, params["boundary"], "model")
		if ae, ok := errors.AsType[*ambiguousError](err); ok {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: ae.Error(), Err: err}
		}
		if err != nil {
			return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "request body is not a valid multipart form", Err: err}
		}
		if err := checkModel(model); err != nil {
			return err
		}
		req.Model, req.Body, req.ContentType = model, body, contentType
		return nil
	}
	parsed, err := Parse(req.Protocol, body)
	if err != nil {
		return err
	}
	req.Model, req.User, req.Body = parsed.Model, parsed.User, body
	return nil
}

// maxFormValue bounds a form field Sluice reads (the model name).
const maxFormValue = 1 << 10

// formValue returns the value of the multipart form field name ("" when
// absent), reading the whole body so that a malformed one is refused here
// rather than upstream. As for JSON bodies (see readFields), the field must
// be one plain part, once, so that no form reader can take another part for
// it: the body is refused when a part is named name a second time, in
// another case or as a file, when a part is named by RFC 2231's name*, or
// has a Content-Disposition that does not parse (Go's reader would skip
// it, others might read it) or is given twice.
func formValue(body []byte, boundary, name string) (string, error) {
	if boundary == "" {
		return "", errors.New("no boundary")
	}
	rd := multipart.NewReader(bytes.NewReader(body), boundary)
	value, found := "", false
	for {
		part, err := rd.NextRawPart()
		if errors.Is(err, io.EOF) {
			return value, nil
		}
		if err != nil {
			return "", err
		}
		disposition := part.Header.Values("Content-Disposition")
		if len(disposition) != 1 {
			return "", errors.New("a part without exactly one Content-Disposition")
		}
		_, params, err := mime.ParseMediaType(disposition[0])
		if err != nil {
			return "", fmt.Errorf("a part's Content-Disposition: %w", err)
		}
		if extendedName(disposition[0]) {
			return "", errors.New("a part named with name*")
		}
		partName, _, _ := strings.Cut(params["name"], "\x00")
		if !strings.EqualFold(partName, name) {
			continue // NextRawPart skips what is left of it
		}
		if found || params["name"] != name || part.FileName() != "" {
			return "", &ambiguousError{field: name}
		}
		found = true
		b, err := io.ReadAll(io.LimitReader(part, maxFormValue+1))
		if err != nil {
			return "", err
		}
		if len(b) > maxFormValue {
			return "", fmt.Errorf("field %s longer than %d bytes", name, maxFormValue)
		}
		value = string(b)
	}
}

// extendedName reports whether a Content-Disposition has a name* parameter
// (RFC 2231: name*=, or continuations name*0=, name*1=…), which
// mime.ParseMediaType prefers to name and other readers ignore. Splitting
// on every ';', quoted or not, may find more parameters than there are,
// never fewer.
func extendedName(disposition string) bool {
	for _, param := range strings.Split(disposition, ";")[1:] {
		key, _, _ := strings.Cut(param, "=")
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(key)), "name*") {
			return true
		}
	}
	return false
}

// jobHeaders are the upstream headers a job's caller can act on. Nothing
// else passes: fal's X-Fal-Request-Id, for one, is the upstream's job ID.
var jobHeaders = []string{"Content-Type", "Openai-Poll-After-Ms", "Retry-After", "Retry-After-Ms", "X-Fal-Error-Type", "Content-Disposition"}

// renderJob writes a job answer with Sluice's job ID (and, for fal, its
// URLs) in place of the upstream's: the caller never learns which upstream
// job, and so which credential, runs its job. A download is streamed.
func renderJob(w http.ResponseWriter, r *http.Request, p sluice.Protocol, ans *pipeline.JobAnswer) error {
	h := w.Header()
	for _, k := range jobHeaders {
		if v := ans.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if ans.Stream != nil {
		defer ans.Stream.Close()
		if n := ans.Header.Get("Content-Length"); n != "" {
			h.Set("Content-Length", n)
		}
		mt, _, _ := mime.ParseMediaType(ans.Header.Get("Content-Type"))
		if mt == "text/event-stream" { // a stored response streamed again
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
		}
		w.WriteHeader(ans.Status)
		if mt == "text/event-stream" {
			return copyEvents(w, ans.Stream)
		}
		_, err := io.Copy(w, ans.Stream)
		return err
	}
	body := ans.JSON
	if job := ans.Job; job.ID != "" {
		if p == sluice.ProtocolFalQueue {
			base := origin(r) + "/fal/requests/" + job.ID
			for field, u := range map[string]string{"status_url": base + "/status", "response_url": base, "cancel_url": base + "/cancel"} {
				if _, _, ok, _ := jsonfield.Find(body, field); ok {
					body, _ = jsonfield.SetString(body, field, u)
				}
			}
		}
		body = bytes.ReplaceAll(body, []byte(job.UpstreamID), []byte(job.ID))
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(ans.Status)
	_, err := w.Write(body)
	return err
}

// origin is the scheme and host the caller reached Sluice at.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
