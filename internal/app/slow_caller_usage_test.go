package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
)

// slowCallerAnswer is the size of the stream the upstream sends at once in
// TestStreamEndIsRecordedBeforeASlowCallerTakesIt: more than the kernel's
// buffers between the gateway and a caller that reads nothing hold (about
// 2.7 MiB on Linux's defaults), less than those and what Sluice keeps for
// a slow caller.
const slowCallerAnswer = 3 << 20

// TestStreamEndIsRecordedBeforeASlowCallerTakesIt (issue 24 item 18): an
// upstream stream received whole while its caller reads none of it is
// recorded (its usage on disk) when the upstream's answer ends, not when
// the caller has taken it: a gateway killed meanwhile has not lost it.
func TestStreamEndIsRecordedBeforeASlowCallerTakesIt(t *testing.T) {
	// The caller is slow, not gone: the idle timeout stays far off.
	h := newHarnessWith(t, strings.Replace(catalogTemplate, "idle: 500ms", "idle: 20s", 1), "{backend: memory}", simulator.Options{})
	piece := `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` +
		strings.Repeat("x", 1000) + `"}}]}` + "\n\n"
	h.srvA.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for n := 0; n < slowCallerAnswer; n += len(piece) {
			io.WriteString(w, piece)
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],`+
			`"usage":{"prompt_tokens":7,"completion_tokens":3000,"total_tokens":3007}}`+"\n\ndata: [DONE]\n\n")
	})
	// A caller that takes nothing: its receive buffer is as small as the
	// kernel allows, and it reads no byte past the headers.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := dialer.Dial("tcp", h.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := strings.Replace(chatBody, `"model"`, `"stream":true,"model"`, 1)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		keyWeb, len(body), body)
	rd := bufio.NewReaderSize(conn, 16)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream = %v, %v; want 200", resp, err)
	}

	db, err := sqldb.Open(t.Context(), "sqlite://"+h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recorded := false
	for deadline := time.Now().Add(3 * time.Second); !recorded && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recorded = h.spooled(t, resp.Header.Get("X-Request-Id"))
		if recs, err := sqlledger.New(db).ListUsage(t.Context(), time.Time{}, 0); err == nil && len(recs) > 0 {
			recorded = recorded || recs[0].Usage.CompletionTokens == 3000
		}
	}
	if !recorded {
		t.Errorf("the stream's usage was not recorded while its caller was slow to take it")
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || len(got) < slowCallerAnswer || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
		t.Errorf("the caller then read %d bytes (%v), want the whole stream", len(got), err)
	}
}

// spooled reports whether the gateway's spool holds a record of request id.
func (h *harness) spooled(t *testing.T, id string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(h.dbPath+"-spool", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			found = found || bytes.Contains(b, []byte(id))
		}
		return nil
	})
	return found
}
