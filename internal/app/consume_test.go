package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/app"
)

// sluice consume refuses what it cannot run with, saying why.
func TestConsumeRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	noEvents := write("no-events.yaml", "version: 1\n")
	noConsumer := write("no-consumer.yaml", "version: 1\nevents:\n  nats: {url: nats://127.0.0.1:4222}\n")
	badURL := write("bad-url.yaml", "version: 1\nevents:\n  nats: {url: \"nats://u:hunter2@127.0.0.1:4222\"}\n  consumer: {url: \"postgres://x/y\"}\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"NoConfig", nil, 2, "usage: sluice consume --config FILE"},
		{"BadLogLevel", []string{"--config", noEvents, "--log-level", "loud"}, 2, "usage: sluice consume"},
		{"MissingFile", []string{"--config", filepath.Join(dir, "missing.yaml")}, 1, "no such file"},
		{"NoEvents", []string{"--config", noEvents}, 1, "needs events.nats (the stream) and events.consumer"},
		{"NoConsumer", []string{"--config", noConsumer}, 1, "needs events.nats (the stream) and events.consumer"},
		{"PasswordInURL", []string{"--config", badURL}, 1, "events.nats.url: holds a user or password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := app.Run(context.Background(), append([]string{"consume"}, tt.args...), &bytes.Buffer{}, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.want)
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("stderr holds the URL's password: %q", stderr.String())
			}
		})
	}
}
