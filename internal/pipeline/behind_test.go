package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// What is written through behind reaches the caller whole and in order,
// flushed, by the time finish returns.
func TestBehindDeliversInOrder(t *testing.T) {
	rec := httptest.NewRecorder()
	b := newBehind(rec)
	b.WriteHeader(200)
	var want bytes.Buffer
	for i := range 5000 {
		piece := fmt.Sprintf("data: %d\n\n", i)
		want.WriteString(piece)
		if _, err := b.Write([]byte(piece)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if i%100 == 0 {
			b.FlushError()
		}
	}
	b.finish()
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) || !rec.Flushed {
		t.Errorf("the caller got %d bytes (flushed %v), want the %d written, in order", rec.Body.Len(), rec.Flushed, want.Len())
	}
}

// A write deadline in the past cuts the answer: later writes fail, and
// finish does not wait for what was dropped.
func TestBehindCut(t *testing.T) {
	b := newBehind(httptest.NewRecorder())
	b.WriteHeader(200)
	b.Write([]byte("data: 1\n\n"))
	b.SetWriteDeadline(time.Unix(1, 0))
	if _, err := b.Write([]byte("data: 2\n\n")); !errors.Is(err, errCut) {
		t.Errorf("a write after the cut = %v, want errCut", err)
	}
	done := make(chan struct{})
	go func() { b.finish(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("finish waits after a cut")
	}
}
