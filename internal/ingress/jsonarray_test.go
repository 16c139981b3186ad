package ingress

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// reframe passes events, written in pieces of at most split bytes, through
// a jsonArrayWriter and returns what the caller got.
func reframe(events []byte, split int) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	a := &jsonArrayWriter{ResponseWriter: rec}
	a.Header().Set("Content-Type", "text/event-stream")
	a.WriteHeader(http.StatusOK)
	for len(events) > 0 {
		n := min(max(split, 1), len(events))
		_, _ = a.Write(events[:n])
		events = events[n:]
	}
	a.close()
	return rec
}

func TestJSONArrayWriter(t *testing.T) {
	events := "data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nevent: x\ndata: {\"error\":{\"code\":500}}\n\n"
	for _, split := range []int{1, 3, 1000} {
		rec := reframe([]byte(events), split)
		want := "[{\"a\":1},\r\n{\"b\":\n2},\r\n{\"error\":{\"code\":500}}]"
		if got := rec.Body.String(); got != want || rec.Header().Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Errorf("split %d: %q (%s), want %q", split, got, rec.Header().Get("Content-Type"), want)
		}
	}
	if got := reframe(nil, 1).Body.String(); got != "[]" {
		t.Errorf("no event = %q, want []", got)
	}
	// An error answer is not a stream: it passes as it is.
	rec := httptest.NewRecorder()
	a := &jsonArrayWriter{ResponseWriter: rec}
	a.Header().Set("Content-Type", "application/json")
	a.WriteHeader(http.StatusTooManyRequests)
	_, _ = a.Write([]byte(`{"error":{}}`))
	a.close()
	if rec.Body.String() != `{"error":{}}` {
		t.Errorf("error answer = %q", rec.Body.String())
	}
}

// FuzzJSONArrayWriter: whatever JSON values the events carry, one per
// data line, and however the writes cut them, the caller gets one JSON
// array of exactly those values.
func FuzzJSONArrayWriter(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`[2,3]`), uint8(1), true)
	f.Add([]byte(`"x"`), []byte(`{"candidates":[]}`), uint8(7), false)
	f.Fuzz(func(t *testing.T, v1, v2 []byte, split uint8, crlf bool) {
		var values []json.RawMessage
		var events bytes.Buffer
		eol := "\n"
		if crlf {
			eol = "\r\n"
		}
		for _, v := range [][]byte{v1, v2} {
			var c bytes.Buffer
			if !json.Valid(v) || json.Compact(&c, v) != nil || c.Len() == 0 {
				return
			}
			values = append(values, c.Bytes())
			events.WriteString(": comment" + eol + "data: " + c.String() + eol + eol)
		}
		got := reframe(events.Bytes(), int(split)).Body.Bytes()
		var list []json.RawMessage
		if err := json.Unmarshal(got, &list); err != nil || len(list) != len(values) {
			t.Fatalf("%q is not an array of %d values: %v", got, len(values), err)
		}
		for i := range list {
			if !bytes.Equal(list[i], values[i]) {
				t.Fatalf("element %d = %s, want %s", i, list[i], values[i])
			}
		}
	})
}
