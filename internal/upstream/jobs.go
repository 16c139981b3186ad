package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// JobCall is one call of an async job API (OpenAI Videos, the fal queue):
// a submit, a poll, a download or a cancel.
type JobCall struct {
	Method      string
	URL         string // absolute; see JobURL
	Body        []byte // nil: none
	ContentType string // of Body; "" is application/json
	Submit      bool   // a submit: the endpoint's breaker may refuse it, so another edge can take it
}

// JobURL is the upstream URL of a job call on e, from the endpoint's base
// URL: for OpenAI Videos /v1/videos followed by the parts ("video_…",
// "content"), for OpenAI Responses /v1/responses followed by the stored
// response's id, for the fal queue the parts alone (the endpoint ID on submit).
func JobURL(e *sluice.Edge, parts ...string) string {
	base := strings.TrimSuffix(e.Endpoint.BaseURL, "/")
	var b strings.Builder
	b.WriteString(base)
	collection := "" // OpenAI's resource under /v1
	switch e.Protocol {
	case sluice.ProtocolOpenAIVideos:
		collection = "/videos"
	case sluice.ProtocolOpenAIResponses:
		collection = "/responses" // a stored response's follow-ups
	}
	if collection != "" {
		if !strings.HasSuffix(base, "/v1") {
			b.WriteString("/v1")
		}
		b.WriteString(collection)
	}
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(p))
	}
	return b.String()
}

// SameOrigin reports whether u is an http(s) URL on the endpoint's scheme and
// host: follow-up URLs an upstream returns (fal's status_url…) are used only
// then, so an upstream cannot point Sluice — and the credential it sends — at
// another host.
func SameOrigin(e *sluice.Edge, u string) bool {
	base, err1 := url.Parse(e.Endpoint.BaseURL)
	got, err2 := url.Parse(u)
	return err1 == nil && err2 == nil && got.Scheme == base.Scheme && got.Host == base.Host && got.User == nil
}

// SetFormField returns a multipart/form-data body (of media type
// contentType) with the field name set to value: its part replaced, or one
// added at the end. Every other part is kept byte for byte, file uploads
// included.
func SetFormField(body []byte, contentType, name, value string) ([]byte, error) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return nil, fmt.Errorf("not a multipart body: %q", contentType)
	}
	rd := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var out bytes.Buffer
	out.Grow(len(body) + len(value))
	w := multipart.NewWriter(&out)
	if err := w.SetBoundary(params["boundary"]); err != nil {
		return nil, err
	}
	set := false
	for {
		part, err := rd.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read multipart body: %w", err)
		}
		if part.FormName() == name && part.FileName() == "" {
			if err := w.WriteField(name, value); err != nil {
				return nil, err
			}
			set = true
			continue
		}
		dst, err := w.CreatePart(part.Header)
		if err == nil {
			_, err = io.Copy(dst, part)
		}
		if err != nil {
			return nil, fmt.Errorf("copy multipart part: %w", err)
		}
	}
	if !set {
		if err := w.WriteField(name, value); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// maxJobAnswer bounds a job API answer that is read whole (everything but a
// download's body).
const maxJobAnswer = 1 << 20

// CallJob runs one job API call on edge e with e's credential, sent the way
// the endpoint's protocol expects ("Key …" for fal, a bearer token
// otherwise), under the endpoint's phase timeouts (connect, first byte, idle
// between reads of the answer, total) like any execution.
// On a 2xx answer the response body is left open for the caller to stream
// (and close): a video download is never buffered; its Attempt has Class
// ClassNone. A non-2xx answer is read (up to 64 KiB), classified, and
// returned with that body, scrubbed of the secret and anything key-shaped
// (body and header), so the caller can pass it on; a 2xx answer's header is
// scrubbed of the secret, and ReadJobAnswer masks it in a JSON answer (a
// download is passed on as it is). With no answer the
// response is nil. Only endpoint failures count against the endpoint's
// breaker, which refuses only submits (a follow-up has nowhere else to go).
func (c *Caller) CallJob(ctx context.Context, e *sluice.Edge, call JobCall) (*http.Response, Attempt) {
	a := Attempt{Exec: newExecution(e)}
	if !e.Credential.InService() {
		a.Class, a.Skipped, a.Err = ClassEndpoint, true, fmt.Errorf("credential %s: %w", e.Credential.ID, errNoAccessToken)
		return nil, a
	}
	br := c.Breaker(e.Endpoint.ID)
	if call.Submit && !br.Allow() {
		a.Class, a.Skipped, a.Err = ClassEndpoint, true, fmt.Errorf("endpoint %s: breaker open", e.Endpoint.ID)
		return nil, a
	}
	resp := c.callJob(ctx, e, call, &a)
	a.Exec.Duration = time.Since(a.Exec.Started)
	a.Exec.Status = executionStatus[a.Class]
	if a.Err != nil {
		a.Exec.Error = a.Err.Error()
	}
	c.report(br, e.Endpoint.ID, a.Class)
	if a.Class != ClassNone && a.Class != ClassRequest {
		c.log.LogAttrs(ctx, slog.LevelDebug, "upstream job call failed", slog.String("edge_id", e.ID),
			slog.String("method", call.Method), slog.String("class", a.Class.String()),
			slog.Int("status", a.Exec.HTTPStatus), slog.String("err", a.Exec.Error))
	}
	return resp, a
}

func (c *Caller) callJob(ctx context.Context, e *sluice.Edge, call JobCall, a *Attempt) *http.Response {
	to := e.Endpoint.Timeouts
	actx, cancel := context.WithCancelCause(ctx)
	timeouts := startPhases(cancel, to)
	end := func() {
		timeouts.stop()
		cancel(nil)
	}
	var body io.Reader = http.NoBody
	if call.Body != nil {
		body = bytes.NewReader(call.Body)
	}
	hreq, err := http.NewRequestWithContext(actx, call.Method, call.URL, body)
	if err != nil {
		end()
		a.Class, a.Err = ClassRequest, fmt.Errorf("build upstream job request: %w", err)
		return nil
	}
	h := hreq.Header
	h["User-Agent"] = userAgent
	if call.Body != nil {
		h["Content-Type"] = jsonContentType
		if call.ContentType != "" {
			h["Content-Type"] = []string{call.ContentType}
		}
	}
	resp, secret, err := c.send(hreq, c.protocols.dialect(e), nil, e.Credential, e.Endpoint)
	if err != nil {
		end()
		a.Class, a.Err = failureOf(ctx, actx, err)
		return nil
	}
	a.Exec.HTTPStatus = resp.StatusCode
	a.Exec.FirstByte = time.Since(a.Exec.Started)
	timeouts.receiving()
	resp.Body = &jobBody{idleReader: idleReader{r: resp.Body, p: timeouts}, body: resp.Body, end: end, secret: secret}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		scrubHeader(resp.Header, secret, false)
		return resp
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return nil
	}
	classifyRejection(a, resp, answer)
	// The caller may see this answer: scrubbed as rejected's are.
	scrubError(answer, secret)
	scrubHeader(resp.Header, secret, true)
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	resp.ContentLength = int64(len(answer))
	return resp
}

// ReadJobAnswer reads a job API answer that is JSON (not a download), with
// the call's secret masked: the caller may see it.
func ReadJobAnswer(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJobAnswer+1))
	if err == nil && len(b) > maxJobAnswer {
		err = errors.New("upstream job answer larger than 1 MiB")
	}
	if jb, ok := resp.Body.(*jobBody); ok {
		maskSecret(b, jb.secret)
	}
	return b, err
}

// jobBody is the body of a job call's answer: reads restart its idle
// timeout, and closing it ends the call.
type jobBody struct {
	idleReader
	body   io.Closer
	end    func()
	secret string // masked in the answer ReadJobAnswer reads
}

func (b *jobBody) Close() error {
	err := b.body.Close()
	b.end()
	return err
}
