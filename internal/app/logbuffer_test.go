package app

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter counts the writes it is given.
type countingWriter struct {
	mu     sync.Mutex
	writes int
	text   strings.Builder
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.text.Write(p)
}

func (w *countingWriter) read() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.text.String()
}

// TestLogBufferBatchesInfoAndFlushesWarnings: info lines (the access log)
// reach the output together, not a write each; a warning is written at
// once with every line before it; Close writes the rest.
func TestLogBufferBatchesInfoAndFlushesWarnings(t *testing.T) {
	out := &countingWriter{}
	b := newLogBuffer(out)
	log := slog.New(flushingHandler{slog.NewJSONHandler(b, nil), b})
	for range 100 {
		log.Info("request", "status", 200)
	}
	if n, _ := out.read(); n > 10 {
		t.Errorf("100 info lines took %d writes, want them gathered (one per flush period)", n)
	}
	log.LogAttrs(context.Background(), slog.LevelWarn, "upstream failing")
	_, text := out.read()
	if strings.Count(text, `"msg":"request"`) != 100 || !strings.HasSuffix(text, "\"msg\":\"upstream failing\"}\n") {
		t.Fatalf("after a warning: %d info lines, ends %q; want everything written, in order",
			strings.Count(text, `"msg":"request"`), text[max(0, len(text)-60):])
	}
	log.Info("last")
	time.Sleep(3 * logFlushEvery)
	if _, text := out.read(); !strings.Contains(text, `"msg":"last"`) {
		t.Error("an info line was not written within a few flush periods")
	}
	log.Info("at close")
	b.Close()
	if _, text := out.read(); !strings.Contains(text, `"msg":"at close"`) {
		t.Error("Close did not write the buffered line")
	}
}
