package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Telemetry configures the traces Sluice sends to an OpenTelemetry
// collector (docs/tracing.md). Off unless OTLP.Endpoint is set. Read at
// startup: changing it takes a restart.
type Telemetry struct {
	OTLP OTLP `yaml:"otlp"`
	// Sample is the share of the traces that start at Sluice which are
	// recorded, from 0 to 1; a caller's traceparent decides for its own
	// trace. nil: 1, every trace.
	Sample *float64 `yaml:"sample"`
}

// OTLP locates the collector that receives the spans over OTLP.
type OTLP struct {
	// Endpoint is the http:// or https:// URL spans are posted to; a URL
	// without a path gets OTLP's /v1/traces. "" = tracing off.
	Endpoint string `yaml:"endpoint"`
	// Protocol is the OTLP transport: http/protobuf, the only one built
	// (also the default).
	Protocol string `yaml:"protocol"`
	// HeadersEnv are headers sent with every export (a collector's or a
	// vendor's API key), by name, each naming the environment variable
	// that holds its value: the values never stand in the catalog.
	HeadersEnv map[string]string `yaml:"headers_env"`
}

// ProtocolHTTPProtobuf is OTLP over HTTP with protobuf bodies.
const ProtocolHTTPProtobuf = "http/protobuf"

// On reports whether tracing is configured.
func (t *Telemetry) On() bool { return t.OTLP.Endpoint != "" }

// SampleRatio is the share of the traces started here that are recorded.
func (t *Telemetry) SampleRatio() float64 {
	if t.Sample == nil {
		return 1
	}
	return *t.Sample
}

// TracesURL is the URL spans are posted to: the endpoint, with OTLP's
// default path when it has none.
func (t *Telemetry) TracesURL() string {
	u, err := url.Parse(t.OTLP.Endpoint)
	if err != nil || u.Path != "" && u.Path != "/" {
		return t.OTLP.Endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Headers are the export headers with their values read from the
// environment. Errors name the variable, never a value.
func (t *Telemetry) Headers(lookupEnv func(string) (string, bool)) (map[string]string, error) {
	h := make(map[string]string, len(t.OTLP.HeadersEnv))
	for name, env := range t.OTLP.HeadersEnv {
		v, err := readEnv("headers_env."+name, env, lookupEnv)
		if err != nil {
			return nil, err
		}
		h[name] = strings.TrimSpace(v)
	}
	return h, nil
}

func (v *validator) telemetry() {
	t := &v.c.Telemetry
	const at = "telemetry"
	if !t.On() {
		if t.OTLP.Protocol != "" || len(t.OTLP.HeadersEnv) > 0 || t.Sample != nil {
			v.addf(at+".otlp.endpoint", "required when the telemetry section sets anything else (tracing is off without it)")
		}
		// A catalog key's trace_content would do nothing; keys made through
		// the admin API may carry it as a standing permission.
		for i, k := range v.c.Keys {
			if k.TraceContent {
				v.addf(fmt.Sprintf("keys[%d].trace_content", i), "needs telemetry.otlp.endpoint: tracing is off")
			}
		}
		return
	}
	// The URL is not quoted back: it might carry user info.
	switch u, err := url.Parse(t.OTLP.Endpoint); {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.addf(at+".otlp.endpoint", "must be an http:// or https:// URL with a host")
	case u.User != nil:
		v.addf(at+".otlp.endpoint", "must not carry user info: put a collector's credentials in headers_env")
	}
	switch t.OTLP.Protocol {
	case "", ProtocolHTTPProtobuf:
	case "grpc":
		v.addf(at+".otlp.protocol", "grpc is not built; use %s", ProtocolHTTPProtobuf)
	default:
		v.addf(at+".otlp.protocol", "must be %s, got %q", ProtocolHTTPProtobuf, t.OTLP.Protocol)
	}
	for name, env := range t.OTLP.HeadersEnv {
		path := at + ".otlp.headers_env." + name
		if name == "" || strings.ContainsFunc(name, notTokenChar) {
			v.addf(path, "is not a valid header name")
			continue
		}
		if _, err := readEnv("", env, v.lookupEnv); err != nil {
			v.addf(path, "%v", err)
		}
	}
	if s := t.SampleRatio(); !(s >= 0 && s <= 1) { // NaN too
		v.addf(at+".sample", "must be from 0 to 1, got %s", fmt.Sprint(s))
	}
}

// notTokenChar reports whether r may not stand in a header name (an RFC
// 9110 token).
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}
