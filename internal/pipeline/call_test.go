package pipeline

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memstore"
	"github.com/sluicehq/sluice/internal/upstream"
)

// TestClaimIsReleasedWhenTheAttemptPanics: a panic inside an attempt (here a
// Handler without a caller) still gives the claim back.
func TestClaimIsReleasedWhenTheAttemptPanics(t *testing.T) {
	s := memstore.New()
	eng := capacity.New(s, s, "r", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cands := []store.Candidate{{Unit: store.Unit{ID: "u", Cap: 1}, Credential: "c"}}
	claim, err := eng.Wait(t.Context(), store.Acquire{Domain: "d", Ticket: "t", Queue: "q"}, time.Now().Add(time.Second),
		func() (string, []store.Candidate) { return "d", cands })
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{}
	func() {
		defer func() { _ = recover() }()
		h.execute(context.Background(), httptest.NewRecorder(), &sluice.Request{}, &sluice.Edge{}, time.Now(), claim, upstream.Hooks{})
	}()
	us, _ := s.Units(t.Context(), "d", []string{"u"})
	if us[0].InFlight != 0 {
		t.Errorf("in flight after a panicking attempt = %d, want 0", us[0].InFlight)
	}
}
