package pipeline

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/respcache"
)

// flushes records what reached it between flushes.
type flushes struct {
	*httptest.ResponseRecorder
	chunks []string
	open   string
}

func (f *flushes) Write(b []byte) (int, error) {
	f.open += string(b)
	return f.ResponseRecorder.Write(b)
}

func (f *flushes) Flush() {
	if f.open != "" {
		f.chunks, f.open = append(f.chunks, f.open), ""
	}
}

// TestCaptureReplaysTheChunking: what a miss's caller received between
// flushes is replayed as the same chunks, each flushed; the content type
// is kept and the answer marked as a hit.
func TestCaptureReplaysTheChunking(t *testing.T) {
	original := &flushes{ResponseRecorder: httptest.NewRecorder()}
	c := &capture{ResponseWriter: original, limit: 1 << 10}
	c.Header().Set("Content-Type", "text/event-stream")
	c.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c)
	for _, w := range [][]string{{"data: 1\n\n"}, {"data: 2", "\n\n"}, {"data: [DONE]\n\n"}} {
		for _, part := range w {
			_, _ = c.Write([]byte(part))
		}
		if err := rc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	e := &respcache.Entry{ContentType: c.Header().Get("Content-Type"), Chunks: c.chunks()}
	replayed := &flushes{ResponseRecorder: httptest.NewRecorder()}
	replay(replayed, e)
	replayed.Flush() // the end of the answer
	want := []string{"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"}
	if !slices.Equal(original.chunks, want) || !slices.Equal(replayed.chunks, want) {
		t.Errorf("original chunks %q, replayed %q; want %q", original.chunks, replayed.chunks, want)
	}
	if h := replayed.Header(); h.Get("Content-Type") != "text/event-stream" || h.Get(CacheHeader) != "hit" || replayed.Code != http.StatusOK {
		t.Errorf("replayed %d %v", replayed.Code, h)
	}
}

// TestCaptureKeepsNothingPastItsLimit: an answer larger than
// max_entry_bytes still reaches its caller whole, but is not kept.
func TestCaptureKeepsNothingPastItsLimit(t *testing.T) {
	rec := httptest.NewRecorder()
	c := &capture{ResponseWriter: rec, limit: 8}
	_, _ = c.Write([]byte("12345"))
	_, _ = c.Write([]byte("6789"))
	if !c.over || len(c.chunks()) != 0 || rec.Body.String() != "123456789" {
		t.Errorf("over %v, chunks %q, caller got %q", c.over, c.chunks(), rec.Body.String())
	}
}

func TestCacheControl(t *testing.T) {
	for v, want := range map[string][2]bool{
		"":                    {false, false},
		"no-store":            {true, false},
		"No-Cache":            {false, true},
		"max-age=0, no-cache": {false, true},
		"no-cache,no-store":   {true, true},
		"no-transform":        {false, false},
	} {
		noStore, noCache := cacheControl(http.Header{"Cache-Control": {v}})
		if [2]bool{noStore, noCache} != want {
			t.Errorf("%q: no-store %v, no-cache %v; want %v", v, noStore, noCache, want)
		}
	}
}

func TestCacheable(t *testing.T) {
	for _, c := range []struct {
		req  sluice.Request
		want bool
	}{
		{sluice.Request{Protocol: sluice.ProtocolOpenAIChat}, true},
		{sluice.Request{Protocol: sluice.ProtocolGemini}, true},
		{sluice.Request{Protocol: sluice.ProtocolOpenAIEmbeddings}, false},
		{sluice.Request{Protocol: sluice.ProtocolAnthropic, CountTokens: true}, false},
		{sluice.Request{Protocol: sluice.ProtocolOpenAIResponses, Compact: true}, false},
	} {
		if got := cacheable(&c.req); got != c.want {
			t.Errorf("%+v: cacheable %v", c.req, got)
		}
	}
	for body, want := range map[string]bool{`{"background":true}`: true, `{"background":false}`: false, `{}`: false} {
		if got := background(&sluice.Request{Protocol: sluice.ProtocolOpenAIResponses, Body: []byte(body)}); got != want {
			t.Errorf("%s: background %v", body, got)
		}
	}
}
