package app_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSlowBodyIsCutOff sends headers and part of the body, then stalls: the
// gateway answers 408 once the body timeout passes instead of holding the
// connection forever.
func TestSlowBodyIsCutOff(t *testing.T) {
	h := newHarness(t)
	h.writeCatalog(strings.Replace(h.catalog(), "  max_body_bytes: 4096\n", "  max_body_bytes: 4096\n  body_timeout: 300ms\n", 1))
	eventually(t, 2*time.Second, "catalog with body_timeout loaded", func() bool { return h.status(t).Version == 2 })

	conn, err := net.Dial("tcp", h.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"model\":", keyWeb)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufioReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v\n%s", err, h.logs.String())
	}
	defer resp.Body.Close()
	var e envelope
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusRequestTimeout || e.Error.Code != string(sluice.CodeRequestTimeout) {
		t.Errorf("stalled body = %d %+v, want 408 request_timeout", resp.StatusCode, e.Error)
	}
}
