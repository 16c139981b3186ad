package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/simulator"
)

// demo is the built-in provider `sluice serve` starts when it has no
// catalog: an in-process simulated upstream, a catalog routing to it, and a
// static key printed once.
type demo struct {
	server  *http.Server
	sim     *simulator.Simulator
	url     string
	secret  string // the demo credential's upstream secret
	key     string // the demo virtual key
	catalog *config.Catalog
}

const (
	demoCredentialEnv = "SLUICE_DEMO_UPSTREAM_KEY"
	demoKeyEnv        = "SLUICE_DEMO_KEY"
)

func startDemo(log *slog.Logger) (*demo, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo upstream: %w", err)
	}
	d := &demo{sim: simulator.New(simulator.Options{MaxRecords: -1}), url: "http://" + ln.Addr().String(),
		secret: "sk-demo-upstream-" + authn.NewSecret()[len(authn.KeyPrefix):], key: authn.NewSecret()}
	d.server = &http.Server{Handler: d.sim, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = d.server.Serve(ln) }()
	c := &config.Catalog{
		Version: 1,
		// One simulator plays each provider, as one endpoint each, so that
		// a model is called in its provider's protocol and reached from
		// the others' through Sluice's translators, as a real catalog's.
		Endpoints: []config.Endpoint{
			{ID: "demo-openai", BaseURL: d.url, Protocols: []string{"openai.chat", "openai.responses", "openai.embeddings", "openai.videos"}},
			{ID: "demo-anthropic", BaseURL: d.url, Protocols: []string{"anthropic.messages"}},
			{ID: "demo-gemini", BaseURL: d.url, Protocols: []string{"gemini.generate", "gemini.embed"}},
			{ID: "demo-fal", BaseURL: d.url, Protocols: []string{"fal.queue"}},
		},
		// The simulated upstream has no limit of its own: the demo
		// credential (its own account) takes many requests at once rather
		// than the default 2, so that a tour's parallel requests run.
		Credentials: []config.Credential{{ID: "demo-1", SecretEnv: demoCredentialEnv, MaxInflight: new(64),
			Endpoints: []string{"demo-openai", "demo-anthropic", "demo-gemini", "demo-fal"}}},
		// The generation aliases name no protocol: each answers OpenAI
		// chat, Responses, Anthropic Messages and Gemini callers alike.
		Models: []config.Model{
			demoAlias("demo", "gpt-4o-mini", "demo-openai", ""),
			demoAlias("gpt-4o-mini", "gpt-4o-mini", "demo-openai", ""),
			demoAlias("text-embedding-3-small", "text-embedding-3-small", "demo-openai", "openai.embeddings"),
			// Claude Code's models.
			demoAlias("claude-sonnet-4-6", "claude-sonnet-4-6", "demo-anthropic", ""),
			demoAlias("claude-haiku-4-5", "claude-haiku-4-5", "demo-anthropic", ""),
			// Codex's model (on OpenAI's endpoint, Responses passes through).
			demoAlias("gpt-5-codex", "gpt-5-codex", "demo-openai", ""),
			// Gemini CLI's model and an embedding model.
			demoAlias("gemini-2.5-flash", "gemini-2.5-flash", "demo-gemini", ""),
			demoAlias("gemini-embedding-001", "gemini-embedding-001", "demo-gemini", "gemini.embed"),
			demoAlias("sora-2", "sora-2", "demo-openai", "openai.videos"),
			demoAlias("fal-ai/veo3", "fal-ai/veo3", "demo-fal", "fal.queue"),
		},
		Keys: []config.Key{{ID: "demo", Name: "demo key", Tenant: "demo", SecretEnv: demoKeyEnv}},
	}
	config.ApplyDefaults(c)
	if err := config.ValidateServing(c, d.lookupEnv(func(string) (string, bool) { return "", false }), dialects.CanServe); err != nil {
		d.close()
		return nil, fmt.Errorf("demo catalog: %w", err)
	}
	d.catalog = c
	return d, nil
}

// demoAlias is an alias of the demo catalog: model on endpoint, for
// callers of protocol ("" for every generation protocol).
func demoAlias(alias, model, endpoint, protocol string) config.Model {
	return config.Model{Alias: alias, Protocol: protocol, Deployments: []config.Deployment{{Model: model, Endpoints: []string{endpoint}}}}
}

// lookupEnv serves the demo's generated secrets and defers to next otherwise.
func (d *demo) lookupEnv(next func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		switch name {
		case demoCredentialEnv:
			return d.secret, true
		case demoKeyEnv:
			return d.key, true
		}
		return next(name)
	}
}

func (d *demo) banner(w io.Writer, addr string) {
	fmt.Fprintf(w, `  demo upstream %s (simulated provider)
  demo key    %s

Try it:
  curl http://%s/v1/chat/completions -H "Authorization: Bearer %s" \
    -H "Content-Type: application/json" -d '{"model":"demo","messages":[{"role":"user","content":"Hello"}]}'
`, d.url, d.key, addr, d.key)
}

func (d *demo) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.server.Shutdown(ctx)
}

// demoUpstreamCommand serves the simulated provider on its own, for
// benchmarks and for trying Sluice against a provider you control.
func demoUpstreamCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9090", "listen address")
	latency := fs.Duration("latency", 0, "delay before each response's headers")
	chunkDelay := fs.Duration("chunk-delay", 0, "delay between stream events")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sim := simulator.New(simulator.Options{MaxRecords: -1, Default: simulator.Behavior{Latency: *latency, ChunkDelay: *chunkDelay}})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo-upstream: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "simulated upstream listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "sluice demo-upstream: %v\n", err)
		return 1
	}
	return 0
}
