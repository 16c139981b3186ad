package ingress

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// routeResponses serves, beside each path of the Responses front (the API's
// and the ChatGPT backend's, where Codex posts), a compaction (POST
// …/compact: a request of the alias its body names, like a creation) and
// the follow-ups of a stored response (GET and DELETE …/{id}, POST
// …/{id}/cancel), which go where the response is stored.
func (s *Server) routeResponses() {
	f := s.fronts[sluice.ProtocolOpenAIResponses]
	if f == nil {
		return
	}
	compact, follow := s.endpoint(f.Protocol, s.serveCompact), s.endpoint(f.Protocol, s.serveStoredResponse)
	for _, path := range f.Paths {
		s.mux.HandleFunc("POST "+path+"/compact", compact)
		s.mux.HandleFunc("GET "+path+"/{id}", follow)
		s.mux.HandleFunc("DELETE "+path+"/{id}", follow)
		s.mux.HandleFunc("POST "+path+"/{id}/cancel", follow)
	}
}

// serveCompact serves POST /v1/responses/compact: a request of its alias,
// admitted, routed, claiming capacity and billed like a creation, to an
// endpoint that speaks Responses (see sluice.Request.Compact). Its answer
// is one JSON object: a compaction does not stream.
func (s *Server) serveCompact(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	return s.serveRequest(w, r, p, id, start, compaction)
}

// compaction makes req a compaction.
func compaction(req *sluice.Request) error {
	if req.Stream {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "stream is not supported when compacting a conversation"}
	}
	req.Compact = true
	return nil
}

// serveStoredResponse serves a follow-up of a stored response: GET (with
// its query, so stream=true streams), DELETE, or POST …/cancel, on the
// credential that stored it (pipeline.FollowResponse).
func (s *Server) serveStoredResponse(w *recorder, r *http.Request, p sluice.Protocol, id string, start time.Time) (out pipeline.Outcome, req *sluice.Request, err error) {
	defer s.recoverPanic(r.Context(), id, &err)
	req = &sluice.Request{ID: id, Protocol: p, Received: start}
	pr, err := s.authenticate(r, s.fronts[p].Key(r))
	if err != nil {
		return out, req, closeUnread(w, r, err)
	}
	out.KeyID = pr.Key.ID
	op := pipeline.ResponseGet
	switch r.Method {
	case http.MethodDelete:
		op = pipeline.ResponseDelete
	case http.MethodPost:
		op = pipeline.ResponseCancel
	}
	ans, out, err := s.handler.FollowResponse(r.Context(), pr, req, r.PathValue("id"), op, r.URL.RawQuery)
	if err != nil {
		return out, req, err
	}
	req.Model, req.Stream = ans.Job.Alias, ans.Stream != nil // for the access log
	return out, req, renderJob(w, r, p, ans)
}

// copyEvents passes a stream of server-sent events on as it arrives: each
// read is flushed to the caller at once rather than when a buffer fills.
func copyEvents(w http.ResponseWriter, from io.Reader) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
