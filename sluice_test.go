package sluice_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestCredentialNeverLogsItsSecret(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	c := &sluice.Credential{ID: "openai-k1", Secret: "sk-proj-0123456789abcdefWXYZ"}
	log.Info("using", "credential", c)
	out := buf.String()
	if strings.Contains(out, c.Secret) || !strings.Contains(out, "openai-k1") || !strings.Contains(out, "WXYZ") {
		t.Errorf("log line = %s, want the ID and the last four characters only", out)
	}
}

func TestEveryCodeHasOneStatus(t *testing.T) {
	want := map[sluice.Code]int{
		sluice.CodeNoCredentials:       http.StatusUnauthorized,
		sluice.CodeScopeDenied:         http.StatusForbidden,
		sluice.CodeCapacityWaitTimeout: http.StatusTooManyRequests,
		sluice.CodeNoUpstreamAvailable: http.StatusServiceUnavailable,
		sluice.CodeModelNotFound:       http.StatusNotFound,
		sluice.CodeInvalidRequest:      http.StatusBadRequest,
		sluice.CodeRequestTooLarge:     http.StatusRequestEntityTooLarge,
	}
	for code, status := range want {
		if got := code.Status(); got != status {
			t.Errorf("%s.Status() = %d, want %d", code, got, status)
		}
	}
	for _, c := range sluice.Codes() {
		if s := c.Status(); s < 400 || s > 599 {
			t.Errorf("%s.Status() = %d, not an error status", c, s)
		}
	}
	if got := sluice.Code("made_up").Status(); got != http.StatusInternalServerError {
		t.Errorf("unknown code status = %d, want 500", got)
	}
}

func TestErrorMatchesByCodeAndHidesItsCause(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.1:443: connection refused")
	err := error(&sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream", Err: cause})
	if !errors.Is(err, &sluice.Error{Code: sluice.CodeNoUpstreamAvailable}) || !errors.Is(err, cause) {
		t.Errorf("errors.Is does not see the code or the cause of %v", err)
	}
	if errors.Is(err, &sluice.Error{Code: sluice.CodeModelNotFound}) {
		t.Errorf("errors.Is matched another code")
	}
}

func TestKeyEffectiveStatus(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		give sluice.Key
		want sluice.KeyStatus
	}{
		{"active", sluice.Key{Status: sluice.KeyActive}, sluice.KeyActive},
		{"not yet expired", sluice.Key{Status: sluice.KeyActive, ExpiresAt: now.Add(time.Hour)}, sluice.KeyActive},
		{"expired", sluice.Key{Status: sluice.KeyActive, ExpiresAt: now.Add(-time.Second)}, sluice.KeyExpired},
		{"disabled stays disabled", sluice.Key{Status: sluice.KeyDisabled, ExpiresAt: now.Add(-time.Second)}, sluice.KeyDisabled},
		{"revoked", sluice.Key{Status: sluice.KeyRevoked}, sluice.KeyRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.give.EffectiveStatus(now); got != tt.want {
				t.Errorf("EffectiveStatus = %s, want %s", got, tt.want)
			}
		})
	}
}
