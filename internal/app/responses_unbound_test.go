package app_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// TestUnrecordedResponseIsNotAnotherTenants (issue 24 item 1): a stored
// response whose answer did not reach its end through Sluice — a JSON
// answer too long to hold, a stream the upstream cut, a stream the caller
// cut — is bound from its first bytes. Its creator's follow-up reaches the
// upstream that stored it; another tenant naming it as
// previous_response_id gets Sluice's 404 and reaches no upstream.
func TestUnrecordedResponseIsNotAnotherTenants(t *testing.T) {
	tests := []struct {
		name     string
		behavior simulator.Behavior
		stream   bool
		cut      bool // the caller hangs up after the first event
	}{
		{"JSONLongerThanHeld", simulator.Behavior{Pad: 2 << 20}, false, false},
		{"StreamCutByTheUpstream", simulator.Behavior{CutAfter: 1}, true, false},
		{"StreamCutByTheCaller", simulator.Behavior{ChunkDelay: 200 * time.Millisecond}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, responsesBindingTemplate, "{backend: memory}", simulator.Options{})
			h.simA.SetKey(secretA1, tt.behavior)
			h.simB.SetKey(secretB1, tt.behavior)
			id := createResponse(t, h, tt.stream, tt.cut)
			upstream := func() int { return len(h.simA.Requests()) + len(h.simB.Requests()) }
			before := upstream()
			code, _, body := responseTurn(t, h.gw.Addr(), testEnv["KEY_BG"], id, false)
			if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
				t.Errorf("another tenant continuing %s = %d %.200s, want Sluice's 404", id, code, body)
			}
			if n := upstream() - before; n != 0 {
				t.Errorf("another tenant's turn reached the upstream %d times, want 0", n)
			}
			if code, body := call(t, http.MethodGet, h.url("/v1/responses/"+id), "Bearer "+testEnv["KEY_BG"], "", nil); code != http.StatusNotFound {
				t.Errorf("another tenant's GET = %d %.200s, want 404", code, body)
			}
			before = upstream()
			call(t, http.MethodGet, h.url("/v1/responses/"+id), "Bearer "+keyWeb, "", nil)
			if n := upstream() - before; n != 1 {
				t.Errorf("the creator's GET reached the upstream %d times, want once: the response is bound", n)
			}
		})
	}
}

// createResponse creates a response with keyWeb and returns its id, read
// from the answer's first bytes; cut hangs up once it has them.
func createResponse(t *testing.T, h *harness, stream, cut bool) string {
	t.Helper()
	body := `{"model":"conv","input":"a long story","max_output_tokens":64`
	if stream {
		body += `,"stream":true`
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url("/v1/responses"), strings.NewReader(body+"}"))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("creating a response = %d", resp.StatusCode)
	}
	// Both a Responses object and a stream's response.created carry the
	// id as the first "id" member.
	rd := bufio.NewReader(resp.Body)
	head := make([]byte, 0, 512)
	for !strings.Contains(string(head), `"id":"resp_`) || !strings.Contains(string(head[strings.Index(string(head), `"id":"resp_`)+6:]), `"`) {
		b, err := rd.ReadByte()
		if err != nil {
			t.Fatalf("no response id in %q: %v", head, err)
		}
		head = append(head, b)
	}
	id := string(head[strings.Index(string(head), `"id":"resp_`)+6:])
	id = id[:strings.Index(id, `"`)]
	if !cut {
		_, _ = rd.WriteTo(discard{})
	}
	return id
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
