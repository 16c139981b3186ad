package config

import (
	"math"
	"strings"
	"testing"
)

func TestValidateTelemetry(t *testing.T) {
	on := func(endpoint string) func(c *Catalog) {
		return func(c *Catalog) { c.Telemetry.OTLP.Endpoint = endpoint }
	}
	sample := func(s float64) func(c *Catalog) {
		return func(c *Catalog) { c.Telemetry.OTLP.Endpoint, c.Telemetry.Sample = "http://127.0.0.1:4318", &s }
	}
	checkValidate(t, []validateCase{
		{"off", func(*Catalog) {}, ""},
		{"http", on("http://127.0.0.1:4318"), ""},
		{"https with path", on("https://otel.example.com/otlp/v1/traces"), ""},
		{"http/protobuf", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.Protocol = "http://127.0.0.1:4318", ProtocolHTTPProtobuf
		}, ""},
		{"headers from the environment", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.HeadersEnv = "http://127.0.0.1:4318", map[string]string{"Authorization": "SLUICE_ADMIN_TOKEN"}
		}, ""},
		{"sample 0", sample(0), ""},
		{"sample 1", sample(1), ""},
		{"grpc is not built", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.Protocol = "http://127.0.0.1:4317", "grpc"
		}, "telemetry.otlp.protocol: grpc is not built; use http/protobuf"},
		{"unknown protocol", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.Protocol = "http://127.0.0.1:4318", "http/json"
		}, `telemetry.otlp.protocol: must be http/protobuf, got "http/json"`},
		{"no scheme", on("127.0.0.1:4318"), "telemetry.otlp.endpoint: must be an http:// or https:// URL"},
		{"other scheme", on("grpc://127.0.0.1:4317"), "telemetry.otlp.endpoint: must be an http:// or https:// URL"},
		{"user info", on("https://user:pw@otel.example.com"), "telemetry.otlp.endpoint: must not carry user info"},
		{"header from an unset variable", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.HeadersEnv = "http://127.0.0.1:4318", map[string]string{"Authorization": "NOT_SET"}
		}, "telemetry.otlp.headers_env.Authorization: environment variable NOT_SET is not set"},
		{"header from an empty variable", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.HeadersEnv = "http://127.0.0.1:4318", map[string]string{"X-Key": "BLANK"}
		}, "telemetry.otlp.headers_env.X-Key: environment variable BLANK is empty"},
		{"bad header name", func(c *Catalog) {
			c.Telemetry.OTLP.Endpoint, c.Telemetry.OTLP.HeadersEnv = "http://127.0.0.1:4318", map[string]string{"X Key": "SLUICE_ADMIN_TOKEN"}
		}, "telemetry.otlp.headers_env.X Key: is not a valid header name"},
		{"sample above 1", sample(1.5), "telemetry.sample: must be from 0 to 1, got 1.5"},
		{"negative sample", sample(-0.1), "telemetry.sample: must be from 0 to 1"},
		{"NaN sample", sample(math.NaN()), "telemetry.sample: must be from 0 to 1"},
		{"settings without an endpoint", func(c *Catalog) { s := 0.5; c.Telemetry.Sample = &s },
			"telemetry.otlp.endpoint: required when the telemetry section sets anything else"},
	})
}

func TestTelemetryValuesNeverInErrors(t *testing.T) {
	c := base(t)
	c.Telemetry.OTLP.Endpoint = "https://user:hunter2-0001@otel.example.com"
	err := Validate(c, lookup(testEnv))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Validate = %v; want an error that does not quote the URL's password", err)
	}
}

func TestTelemetryTracesURL(t *testing.T) {
	for give, want := range map[string]string{
		"http://127.0.0.1:4318":                   "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":                  "http://127.0.0.1:4318/v1/traces",
		"https://otel.example.com/otlp/v1/traces": "https://otel.example.com/otlp/v1/traces",
	} {
		tel := Telemetry{OTLP: OTLP{Endpoint: give}}
		if got := tel.TracesURL(); got != want {
			t.Errorf("TracesURL of %s = %s, want %s", give, got, want)
		}
	}
}

func TestTelemetryHeadersFromEnvironment(t *testing.T) {
	tel := Telemetry{OTLP: OTLP{Endpoint: "http://127.0.0.1:4318", HeadersEnv: map[string]string{"Authorization": "SLUICE_ADMIN_TOKEN"}}}
	h, err := tel.Headers(lookup(testEnv))
	if err != nil || h["Authorization"] != testEnv["SLUICE_ADMIN_TOKEN"] {
		t.Errorf("Headers = %v, %v; want Authorization from $SLUICE_ADMIN_TOKEN", h, err)
	}
	tel.OTLP.HeadersEnv["Authorization"] = "NOT_SET"
	if _, err := tel.Headers(lookup(testEnv)); err == nil || !strings.Contains(err.Error(), "NOT_SET") {
		t.Errorf("Headers with an unset variable = %v, want an error naming it", err)
	}
}

func TestTraceContentNeedsTracing(t *testing.T) {
	_, err := Load([]byte(`version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models: [{alias: fast, deployments: [{model: m, endpoints: [ep]}]}]
keys: [{id: web, tenant: web, secret_env: K1, trace_content: true}]
`), func(string) (string, bool) { return "x", true })
	if err == nil || !strings.Contains(err.Error(), "keys[0].trace_content") {
		t.Errorf("trace_content on a catalog key with tracing off: %v, want an error naming the field", err)
	}
}
