package app_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
)

// ingressTemplate serves chat (on simA) and the fal queue (on simB) with
// bodies up to 4 MiB, and at most 16 MiB of bodies held at once.
const ingressTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  max_body_bytes: 4194304
  max_inflight_body_bytes: 16777216
  body_timeout: 20s
  wait_timeout: 5s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-a, base_url: %s, protocols: [openai.chat]}
  - {id: ep-f, base_url: %s, protocols: [fal.queue]}
credentials:
  - {id: cred-a1, secret_env: UP_A1, endpoints: [ep-a]}
  - {id: f1, secret_env: F1, endpoints: [ep-f]}
models:
  - alias: fast
    deployments: [{model: gpt-4o-mini, endpoints: [ep-a]}]
  - alias: veo
    protocol: fal.queue
    deployments: [{model: fal-ai/veo3/fast, endpoints: [ep-f]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
`

// upload is a request written by hand on its own connection, so that a
// test decides how much of its body is sent, and when.
type upload struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

// startUpload sends the request line and headers of a POST to path, with
// framing either a Content-Length or "chunked", and nothing of the body.
func startUpload(t *testing.T, addr, path, auth, framing string) *upload {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n"
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	if framing == "chunked" {
		head += "Transfer-Encoding: chunked\r\n"
	} else {
		head += "Content-Length: " + framing + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return &upload{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// send writes b as it is (for a chunked body, see chunk).
func (u *upload) send(b string) {
	u.t.Helper()
	if _, err := io.WriteString(u.conn, b); err != nil {
		u.t.Fatal(err)
	}
}

// chunk frames b as one chunk of a chunked body.
func chunk(b string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(b), b) }

// answer reads the response, which must come within limit.
func (u *upload) answer(limit time.Duration) (*http.Response, string, error) {
	u.conn.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(u.rd, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// closedWithin reports whether the server closes the connection within
// limit, sending nothing more.
func (u *upload) closedWithin(limit time.Duration) error {
	u.conn.SetReadDeadline(time.Now().Add(limit))
	b, err := u.rd.ReadByte()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("read %q after the answer", b)
	}
	return err
}

// errorCode is the code of an error answer in either envelope: OpenAI's
// {"error": {"code"}} or fal's {"detail", "code"}.
func errorCode(t *testing.T, p sluice.Protocol, body string) string {
	t.Helper()
	if p == sluice.ProtocolFalQueue {
		var e struct {
			Detail string `json:"detail"`
			Code   string `json:"code"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Detail == "" {
			t.Errorf("answer %s: not fal's error envelope (%v)", body, err)
		}
		return e.Code
	}
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
		t.Errorf("answer %s: not OpenAI's error envelope (%v)", body, err)
	}
	return e.Error.Code
}

// TestRefusedCallersBodyIsNeverRead: a caller without a valid key (or on a
// path that does not exist) gets its refusal while it has sent only its
// headers, whatever length it declares and however its body is framed, and
// the connection is closed at once: neither Sluice nor net/http waits for
// the body.
func TestRefusedCallersBodyIsNeverRead(t *testing.T) {
	h := newHarnessWith(t, ingressTemplate, "{backend: memory}", simulator.Options{})
	tests := []struct {
		name     string
		path     string
		protocol sluice.Protocol
		auth     string
		framing  string
		want     sluice.Code
	}{
		{"ChatNoKeyLargeBody", "/v1/chat/completions", sluice.ProtocolOpenAIChat, "", "4194304", sluice.CodeNoCredentials},
		// Under 256 KiB, net/http itself would read the rest after the
		// handler, waiting on the stalled caller.
		{"ChatBadKeySmallBody", "/v1/chat/completions", sluice.ProtocolOpenAIChat, "Bearer sk-sluice-wrong", "1000", sluice.CodeNoCredentials},
		{"ChatNoKeyChunked", "/v1/chat/completions", sluice.ProtocolOpenAIChat, "", "chunked", sluice.CodeNoCredentials},
		{"FalBadKeyLargeBody", "/fal/veo", sluice.ProtocolFalQueue, "Key sk-sluice-wrong", "4194304", sluice.CodeNoCredentials},
		{"FalNoKeySmallBody", "/fal/veo", sluice.ProtocolFalQueue, "", "1000", sluice.CodeNoCredentials},
		{"VideosBadKeyChunked", "/v1/videos", sluice.ProtocolOpenAIVideos, "Bearer sk-sluice-wrong", "chunked", sluice.CodeNoCredentials},
		{"UnknownPathSmallBody", "/v1/nothing", sluice.ProtocolOpenAIChat, "", "1000", sluice.CodeNotFound},
		{"FalUnknownFollowUpChunked", "/fal/requests/x/nothing", sluice.ProtocolFalQueue, "Key " + keyWeb, "chunked", sluice.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := startUpload(t, h.gw.Addr(), tt.path, tt.auth, tt.framing)
			resp, body, err := u.answer(3 * time.Second)
			if err != nil {
				t.Fatalf("no answer while only the headers were sent: %v", err)
			}
			if code := errorCode(t, tt.protocol, body); resp.StatusCode != tt.want.Status() || code != string(tt.want) {
				t.Errorf("answer = %d %s, want %d %s", resp.StatusCode, body, tt.want.Status(), tt.want)
			}
			if !resp.Close {
				t.Errorf("answer headers %v: want Connection: close", resp.Header)
			}
			if err := u.closedWithin(3 * time.Second); err != nil {
				t.Errorf("connection not closed after the answer: %v", err)
			}
		})
	}
}

// TestUnauthenticatedUploadsHoldNoMemory: many keyless callers, each
// declaring a 4 MiB body, sending part of it and stalling, make the server
// hold next to nothing: the probe that found this held ~850 MB. The body
// budget is set far above what they declare, so that it is not what saves
// the server here.
func TestUnauthenticatedUploadsHoldNoMemory(t *testing.T) {
	tpl := strings.Replace(ingressTemplate, "max_inflight_body_bytes: 16777216", "max_inflight_body_bytes: 1073741824", 1)
	h := newHarnessWith(t, tpl, "{backend: memory}", simulator.Options{})
	const callers, declared = 64, 4 << 20
	before := heapInUse()
	uploads := make([]*upload, callers)
	for i := range uploads {
		uploads[i] = startUpload(t, h.gw.Addr(), "/v1/chat/completions", "", fmt.Sprint(declared))
		_, _ = io.WriteString(uploads[i].conn, `{"model":"fast","messages":[`+strings.Repeat(" ", 16<<10))
	}
	// Past the first 20 from one address, a missing key is answered 429
	// (access_auth_throttled) instead of 401: refused at once all the same.
	deadline, unanswered := time.Now().Add(5*time.Second), 0
	for _, u := range uploads {
		if resp, _, err := u.answer(time.Until(deadline)); err != nil || resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			unanswered++
		}
	}
	if unanswered > 0 {
		t.Errorf("%d of %d stalling callers got no 401 or 429", unanswered, callers)
	}
	// Whatever the server still holds is live now; without the fix each
	// caller holds its declared 4 MiB (256 MiB in all) until the body timeout.
	if grown := heapInUse() - before; grown > callers*declared/8 {
		t.Errorf("heap grew by %d MiB for %d refused callers, want next to nothing", grown>>20, callers)
	}
}

// heapInUse is the live heap, after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestBodyBudgetRefusesPastItAndRecovers: authenticated uploads that stall
// hold the server-wide body budget — a declared length whole, a chunked
// body as it grows — and a body that does not fit in what is left gets
// 503 server_busy with a Retry-After, unread, in its caller's protocol,
// while a small one still goes through. Once the stalled uploads end, the
// large bodies go through again.
func TestBodyBudgetRefusesPastItAndRecovers(t *testing.T) {
	tpl := strings.Replace(ingressTemplate, "max_body_bytes: 4194304\n  max_inflight_body_bytes: 16777216",
		"max_body_bytes: 65536\n  max_inflight_body_bytes: 163840", 1)
	h := newHarnessWith(t, tpl, "{backend: memory}", simulator.Options{})
	// 160 KiB in all: a declared 64 KiB body holds 64 KiB; a chunked one
	// that has sent 40 KiB holds the 64 KiB its buffer grew to.
	declared := startUpload(t, h.gw.Addr(), "/v1/chat/completions", "Bearer "+keyWeb, fmt.Sprint(64<<10))
	declared.send(`{"model":"fast",`)
	chunked := startUpload(t, h.gw.Addr(), "/fal/veo", "Key "+keyWeb, "chunked")
	for range 5 {
		chunked.send(chunk(strings.Repeat(" ", 8<<10)))
	}

	large := strings.Repeat("a", 40<<10) // fits in 160 KiB less 64 KiB, not in 160 less 128
	largeChat := `{"model":"fast","messages":[{"role":"user","content":"` + large + `"}]}`
	largeFal := `{"prompt":"` + large + `"}`
	// A body that does not fit is refused before it is sent.
	refusedUnread := func(p sluice.Protocol, path, auth string, size int) {
		u := startUpload(t, h.gw.Addr(), path, auth, fmt.Sprint(size))
		resp, answer, err := u.answer(5 * time.Second)
		if err != nil {
			t.Fatalf("POST %s: no answer while only the headers were sent: %v", path, err)
		}
		if code := errorCode(t, p, answer); resp.StatusCode != http.StatusServiceUnavailable || code != string(sluice.CodeServerBusy) ||
			resp.Header.Get("Retry-After") == "" || !resp.Close {
			t.Errorf("POST %s = %d %v %s, want 503 server_busy with Retry-After and Connection: close", path, resp.StatusCode, resp.Header, answer)
		}
		if err := u.closedWithin(3 * time.Second); err != nil {
			t.Errorf("POST %s: connection not closed after the answer: %v", path, err)
		}
	}
	h.waitBodyBytesHeld(t, 128<<10)
	refusedUnread(sluice.ProtocolOpenAIChat, "/v1/chat/completions", "Bearer "+keyWeb, len(largeChat))
	refusedUnread(sluice.ProtocolFalQueue, "/fal/veo", "Key "+keyWeb, len(largeFal))
	if code, body := call(t, "POST", h.url("/v1/chat/completions"), "Bearer "+keyWeb, chatBody, nil); code != http.StatusOK {
		t.Errorf("small chat body = %d %s, want 200: it fits in what is left", code, body)
	}

	declared.conn.Close()
	chunked.conn.Close()
	h.waitBodyBytesHeld(t, 0)
	if code, body := call(t, "POST", h.url("/v1/chat/completions"), "Bearer "+keyWeb, largeChat, nil); code != http.StatusOK {
		t.Errorf("large chat body after the release = %d %s, want 200", code, body)
	}
	if code, body := call(t, "POST", h.url("/fal/veo"), "Key "+keyWeb, largeFal, nil); code != http.StatusOK {
		t.Errorf("large fal body after the release = %d %s, want 200", code, body)
	}
}

// waitBodyBytesHeld waits until the gateway reports n bytes of request
// bodies held.
func (h *harness) waitBodyBytesHeld(t *testing.T, n int) {
	t.Helper()
	want := fmt.Sprintf("\nsluice_request_body_bytes_held %d\n", n)
	eventually(t, 5*time.Second, "request bodies holding "+fmt.Sprint(n)+" bytes", func() bool {
		_, m := h.adminGet("/metrics")
		return strings.Contains(m, want)
	})
}
