package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name      string
		giveName  string
		giveData  string
		wantWire  string
		wantEvent ev // what a Reader gets back
	}{
		{name: "Data", giveData: "x", wantWire: "data: x\n\n", wantEvent: ev{"data: x\n\n", "", "=x"}},
		{name: "Empty", giveData: "", wantWire: "data:\n\n", wantEvent: ev{"data:\n\n", "", "="}},
		{name: "MultiLine", giveData: "a\n\nb", wantWire: "data: a\ndata:\ndata: b\n\n", wantEvent: ev{"data: a\ndata:\ndata: b\n\n", "", "=a\n\nb"}},
		{name: "TrailingNewline", giveData: "a\n", wantWire: "data: a\ndata:\n\n", wantEvent: ev{"data: a\ndata:\n\n", "", "=a\n"}},
		{name: "CRLFAndCRBecomeLF", giveData: "a\r\nb\rc", wantWire: "data: a\ndata: b\ndata: c\n\n", wantEvent: ev{"data: a\ndata: b\ndata: c\n\n", "", "=a\nb\nc"}},
		{name: "LeadingSpaceKept", giveData: " x", wantWire: "data:  x\n\n", wantEvent: ev{"data:  x\n\n", "", "= x"}},
		{name: "Named", giveName: "response.completed", giveData: `{"type":"response.completed"}`, wantWire: "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", wantEvent: ev{"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", "=response.completed", `={"type":"response.completed"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := NewWriter(rec).WriteEvent([]byte(tt.giveName), []byte(tt.giveData)); err != nil {
				t.Fatal(err)
			}
			if got := rec.Body.String(); got != tt.wantWire {
				t.Errorf("wire = %q, want %q", got, tt.wantWire)
			}
			if !rec.Flushed {
				t.Error("not flushed")
			}
			evs, err := readAll(NewReader(rec.Body))
			if want := []ev{tt.wantEvent}; fmt.Sprint(evs) != fmt.Sprint(want) || err != io.EOF {
				t.Errorf("read back = %v, %v; want %v, EOF", evs, err, want)
			}
		})
	}
}

// TestWriterRoundTrip writes a stream with every method and reads it back.
func TestWriterRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	steps := []func() error{
		func() error { return w.WriteData([]byte(`{"a":1}`)) },
		func() error { return w.WriteRaw([]byte(": ping\n\n")) },
		func() error { return w.WriteEvent([]byte("message_stop"), []byte(`{"type":"message_stop"}`)) },
		func() error { return w.WriteRaw([]byte("data: x\r\ndata: y\r\n\r\n")) },
		func() error { return w.WriteData([]byte("[DONE]")) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step #%d: %v", i, err)
		}
	}
	want := []ev{
		{"data: {\"a\":1}\n\n", "", `={"a":1}`},
		{": ping\n\n", "", ""},
		{"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "=message_stop", `={"type":"message_stop"}`},
		{"data: x\r\ndata: y\r\n\r\n", "", "=x\ny"},
		{"data: [DONE]\n\n", "", "=[DONE]"},
	}
	evs, err := readAll(NewReader(rec.Body))
	if fmt.Sprint(evs) != fmt.Sprint(want) || err != io.EOF {
		t.Errorf("read back = %v, %v; want %v, EOF", evs, err, want)
	}
}

func TestWriterRefusesNameWithLineBreak(t *testing.T) {
	for _, name := range []string{"a\nb", "a\r", "\r\ndata: injected"} {
		rec := httptest.NewRecorder()
		err := NewWriter(rec).WriteEvent([]byte(name), []byte("x"))
		if err != ErrInvalidName || rec.Body.Len() != 0 {
			t.Errorf("WriteEvent(%q) = %v, wrote %q; want %v, nothing", name, err, rec.Body, ErrInvalidName)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		give http.ResponseWriter
		want error
	}{
		{name: "WriteFails", give: &fakeResponse{err: boom}, want: boom},
		{name: "CannotFlush", give: noFlush{httptest.NewRecorder()}, want: http.ErrNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := NewWriter(tt.give).WriteData([]byte("x")); !errors.Is(err, tt.want) {
				t.Errorf("WriteData = %v, want %v", err, tt.want)
			}
		})
	}
}

// noFlush hides the recorder's Flush method.
type noFlush struct{ w http.ResponseWriter }

func (n noFlush) Header() http.Header         { return n.w.Header() }
func (n noFlush) Write(b []byte) (int, error) { return n.w.Write(b) }
func (n noFlush) WriteHeader(code int)        { n.w.WriteHeader(code) }

// fakeResponse discards what is written, or fails with err.
type fakeResponse struct {
	err     error
	h       http.Header
	flushes int
}

func (f *fakeResponse) Header() http.Header { return f.h }
func (f *fakeResponse) WriteHeader(int)     {}
func (f *fakeResponse) Flush()              { f.flushes++ }
func (f *fakeResponse) Write(b []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	return len(b), nil
}

// TestWriterFlushesOverHTTP checks that a client reads each event over a real
// connection while the handler waits before writing the next.
func TestWriterFlushesOverHTTP(t *testing.T) {
	seen := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		w := NewWriter(rw)
		if err := w.WriteData([]byte("first")); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			t.Error("client did not get the first event: not flushed")
		}
		if err := w.WriteData([]byte("second")); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := NewReader(resp.Body)
	for i, want := range []string{"first", "second"} {
		e, err := r.Next()
		if err != nil || string(e.Data) != want {
			t.Fatalf("Next #%d = %q, %v; want %q, nil", i, e.Data, err, want)
		}
		if i == 0 {
			close(seen)
		}
	}
}

// BenchmarkRelay reads an upstream chat stream and relays each event with
// WriteRaw, as the gateway does when no translation is needed.
func BenchmarkRelay(b *testing.B) {
	give := chatStream(500)
	b.ReportAllocs()
	b.SetBytes(int64(len(give)))
	rw := &fakeResponse{h: http.Header{}}
	var rd bytes.Reader
	for b.Loop() {
		rd.Reset(give)
		r, w := NewReader(&rd), NewWriter(rw)
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			if err := w.WriteRaw(e.Raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkWriteData(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-C9xQk2Vd3mYwZJ4rT8bLpA","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5.4","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	w := NewWriter(&fakeResponse{h: http.Header{}})
	for b.Loop() {
		if err := w.WriteData(data); err != nil {
			b.Fatal(err)
		}
	}
}
