package sluice_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
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

		sluice.CodeBillingAccountSuspended: http.StatusForbidden,
		sluice.CodeTenantSuspended:         http.StatusForbidden,
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

// TestKeyCloneSharesNothing fills every slice and map of a Key, inner
// structs' included, and checks that Clone copied each: a field added
// without a line in Clone fails here.
func TestKeyCloneSharesNothing(t *testing.T) {
	var k sluice.Key
	fill(reflect.ValueOf(&k).Elem())
	c := k.Clone()
	var shared func(a, b reflect.Value, path string)
	shared = func(a, b reflect.Value, path string) {
		for i := range a.NumField() {
			fa, fb, at := a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name
			switch fa.Kind() {
			case reflect.Struct:
				shared(fa, fb, at)
			case reflect.Slice, reflect.Map:
				if fa.UnsafePointer() == fb.UnsafePointer() {
					t.Errorf("Clone shares %s", at)
				}
			}
		}
	}
	shared(reflect.ValueOf(k), reflect.ValueOf(*c), "Key")
}

// fill gives every slice of v one element and every map one entry.
func fill(v reflect.Value) {
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Struct:
			fill(f)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
		}
	}
}

// TestDurationText checks how a duration is read from JSON: in Go's form,
// "" for none, and a refusal that names the value.
func TestDurationText(t *testing.T) {
	tests := []struct {
		give    string
		want    time.Duration
		wantErr string
	}{
		{"1m30s", 90 * time.Second, "<nil>"},
		{"", 0, "<nil>"},
		{"-5s", -5 * time.Second, "<nil>"}, // the user of the value decides (config.ValidateKey: policy.wait >= 0)
		{"30", 0, `invalid duration "30" (want e.g. "30s")`},
		{"soon", 0, `invalid duration "soon" (want e.g. "30s")`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			var d sluice.Duration
			err := d.UnmarshalText([]byte(tt.give))
			if got := fmt.Sprint(err); d.D() != tt.want || got != tt.wantErr {
				t.Errorf("UnmarshalText(%q) = %v, %s; want %v, %s", tt.give, d.D(), got, tt.want, tt.wantErr)
			}
		})
	}
}
