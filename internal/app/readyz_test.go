package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// From the start of the drain the admin API's /readyz answers 503, so a
// load balancer stops sending requests, while /healthz stays 204 (a
// liveness probe must not kill a replica finishing its requests) until the
// admin API stops after the drain.
func TestReadyzTurnsUnreadyWhenTheDrainBegins(t *testing.T) {
	// The upstream answers after 2s, within the first-byte timeout: the
	// drain begins while the request waits for it.
	template := strings.Replace(catalogTemplate, "first_byte: 500ms", "first_byte: 10s", 1)
	h := newHarnessWith(t, template, "{backend: memory}", simulator.Options{Default: simulator.Behavior{Latency: 2 * time.Second}})
	probe := func(path string) int {
		resp, err := http.Get("http://" + h.gw.AdminAddr() + path)
		if err != nil {
			return 0 // the admin API stopped
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := probe("/readyz"); got != http.StatusNoContent {
		t.Fatalf("GET /readyz while serving = %d, want 204", got)
	}
	answered := make(chan int, 1)
	go func() {
		code, _, _ := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "only-a", 1))
		answered <- code
	}()
	time.Sleep(500 * time.Millisecond) // the request is running upstream
	closed := make(chan error, 1)
	go func() { closed <- h.gw.Close() }()
	deadline := time.Now().Add(time.Second)
	for probe("/readyz") != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("GET /readyz did not answer 503 within 1s of the drain's start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := probe("/healthz"); got != http.StatusNoContent {
		t.Errorf("GET /healthz while draining = %d, want 204", got)
	}
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the request running at the drain = %d, want 200", code)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}
