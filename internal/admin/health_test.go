package admin_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
)

// /healthz says the process serves; /readyz says whether the data plane
// takes new requests, and turns 503 when the drain begins while /healthz
// stays 204 (a liveness probe must not restart a draining replica). Both
// need no token.
func TestReadyzFollowsTheDrain(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := newServer(t, admin.Options{Tokens: []admin.Token{{ID: "admin", Secret: testToken, Role: admin.RoleWrite}}, Ready: ready.Load})
	get := func(t *testing.T, path string) (int, string) {
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	tests := []struct {
		name       string
		ready      bool
		path       string
		wantStatus int
	}{
		{"serving: ready", true, "/readyz", http.StatusNoContent},
		{"serving: live", true, "/healthz", http.StatusNoContent},
		{"draining: not ready", false, "/readyz", http.StatusServiceUnavailable},
		{"draining: still live", false, "/healthz", http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready.Store(tt.ready)
			if got, body := get(t, tt.path); got != tt.wantStatus {
				t.Errorf("GET %s = %d %s, want %d", tt.path, got, body, tt.wantStatus)
			}
		})
	}
	ready.Store(false)
	if _, body := get(t, "/readyz"); decodeError(t, body).Error.Code != "server_busy" {
		t.Errorf("GET /readyz while draining = %s, want code server_busy", body)
	}
}
