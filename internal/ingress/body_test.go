package ingress

import (
	"errors"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pipeline"
)

func TestBodyBudgetTake(t *testing.T) {
	tests := []struct {
		name     string
		held     int64
		give     int64
		bound    int64
		want     bool
		wantHeld int64
	}{
		{"Fits", 10, 5, 20, true, 15},
		{"FillsExactly", 10, 10, 20, true, 20},
		{"Overflows", 10, 11, 20, false, 10},
		{"NothingFitsAnywhere", 20, 0, 20, true, 20},
		{"BoundLoweredByAReload", 30, 1, 20, false, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bodyBudget
			b.held.Store(tt.held)
			if got := b.take(tt.give, tt.bound); got != tt.want || b.held.Load() != tt.wantHeld {
				t.Errorf("take(%d, %d) = %v, held %d; want %v, held %d", tt.give, tt.bound, got, b.held.Load(), tt.want, tt.wantHeld)
			}
		})
	}
}

// unreadable is a body that fails the test when read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, io.EOF
}

func TestReadBody(t *testing.T) {
	const limit = 64 << 10
	chunked := strings.Repeat("x", 40<<10)
	tests := []struct {
		name       string
		body       io.Reader
		length     int64 // declared; -1 for chunked
		bound      int64 // max_inflight_body_bytes
		wantCode   sluice.Code
		wantHeld   int64 // reserved when readBody returns
		wantClosed bool  // Connection: close, the rest unread
		wantLen    int
	}{
		{"DeclaredIsReservedWhole", strings.NewReader(`{"model":"m"}`), 13, 1 << 20, "", 13, false, 13},
		{"ChunkedReservesAsItGrows", strings.NewReader(chunked), -1, 1 << 20, "", 64 << 10, false, len(chunked)},
		{"EmptyBody", strings.NewReader(""), 0, 1 << 20, "", 0, false, 0},
		{"DeclaredOverTheLimitIsRefusedUnread", unreadable{t}, limit + 1, 1 << 20, sluice.CodeRequestTooLarge, 0, true, 0},
		{"DeclaredOverTheBudgetIsRefusedUnread", unreadable{t}, 2000, 1000, sluice.CodeServerBusy, 0, true, 0},
		{"ChunkedOutgrowingTheBudgetIsCutOff", strings.NewReader(chunked), -1, 20 << 10, sluice.CodeServerBusy, 16 << 10, true, 0},
		{"ChunkedOverTheLimitIsCutOff", strings.NewReader(chunked + chunked), -1, 1 << 20, sluice.CodeRequestTooLarge, 64 << 10, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{}
			r := httptest.NewRequest("POST", "/v1/chat/completions", tt.body)
			r.ContentLength = tt.length
			w := httptest.NewRecorder()
			snap := &pipeline.Snapshot{MaxBodyBytes: limit, MaxInflightBodyBytes: tt.bound}
			body, held, err := s.readBody(w, r, snap)
			if got := asError(err).Code; err != nil && got != tt.wantCode || err == nil && tt.wantCode != "" {
				t.Fatalf("readBody err = %v, want code %q", err, tt.wantCode)
			}
			if held != tt.wantHeld || s.budget.held.Load() != tt.wantHeld {
				t.Errorf("readBody holds %d (budget %d), want %d", held, s.budget.held.Load(), tt.wantHeld)
			}
			if closed := w.Header().Get("Connection") == "close"; closed != tt.wantClosed {
				t.Errorf("Connection: close = %v, want %v", closed, tt.wantClosed)
			}
			if len(body) != tt.wantLen {
				t.Errorf("body of %d bytes, want %d", len(body), tt.wantLen)
			}
		})
	}
}

// stalling sends a little of its body and then breaks off.
type stalling struct{ sent bool }

func (s *stalling) Read(p []byte) (int, error) {
	if s.sent {
		return 0, errors.New("caller stalled")
	}
	s.sent = true
	return copy(p, `{"model":`), nil
}

// A caller that declares a large body and sends a few bytes of it makes the
// server allocate for those bytes, not for what it declared.
func TestReadBodyGrowsAsBytesArrive(t *testing.T) {
	const declared = 4 << 20
	s := &Server{}
	snap := &pipeline.Snapshot{MaxBodyBytes: declared, MaxInflightBodyBytes: 1 << 30}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := httptest.NewRequest("POST", "/v1/chat/completions", &stalling{})
	r.ContentLength = declared
	_, held, _ := s.readBody(httptest.NewRecorder(), r, snap)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > declared/8 {
		t.Errorf("allocated %d KiB for a body that sent 9 bytes", got>>10)
	}
	if held != declared {
		t.Errorf("holds %d of the budget, want the declared %d", held, declared)
	}
}
