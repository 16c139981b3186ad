package ingress

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// Front is the caller side of one protocol: the paths it is served on,
// how a caller presents its Sluice key, and the envelope its errors are
// rendered in, and how a request is read (Read, else Parse). Fronts are
// values without state; which protocols Sluice serves is one table in
// package app.
type Front struct {
	Protocol sluice.Protocol
	// Paths are the POST paths a request of the protocol is served on
	// (none for the job protocols, which route their own paths).
	Paths []string
	// CountPath is the POST path of the protocol's token count, "" for none
	// (see Server.serveCount).
	CountPath string
	// IDHeader also carries Sluice's request ID (besides X-Request-Id),
	// in canonical form, where the protocol's SDKs read one; "" for none.
	IDHeader string
	// Key returns the Sluice key the caller presented, "" when none.
	Key func(r *http.Request) string
	// Envelope renders e, status its HTTP status, as the protocol's error
	// body. Only e.Msg and e.Code reach the caller.
	Envelope func(e *sluice.Error, status int) []byte
	// Read reads a request of the protocol whose path, not only its body,
	// says what it asks (Gemini's model and method); nil: Parse reads the
	// body alone.
	Read func(r *http.Request, body []byte) (*sluice.Request, error)
}

// read reads the request r with its body.
func (f *Front) read(r *http.Request, body []byte) (*sluice.Request, error) {
	if f.Read != nil {
		return f.Read(r, body)
	}
	return Parse(f.Protocol, body)
}

// Fronts of the protocols Sluice serves to callers.
var (
	OpenAIChat = &Front{
		Protocol: sluice.ProtocolOpenAIChat, Paths: []string{openai.ChatPath}, Key: bearer, Envelope: openai.Envelope,
	}
	OpenAIEmbeddings = &Front{
		Protocol: sluice.ProtocolOpenAIEmbeddings, Paths: []string{openai.EmbeddingsPath}, Key: bearer, Envelope: openai.Envelope,
	}
	// OpenAIResponses serves Codex and the OpenAI SDKs' Responses clients,
	// also at the ChatGPT backend's path, where Codex signed in with
	// ChatGPT posts. Beside each path are the compaction and a stored
	// response's follow-ups (Server.routeResponses).
	OpenAIResponses = &Front{
		Protocol: sluice.ProtocolOpenAIResponses, Paths: []string{openai.ResponsesPath, openai.CodexResponsesPath}, Key: bearer, Envelope: openai.Envelope,
	}
	// The job protocols take a bearer token or fal's "Key" scheme alike.
	OpenAIVideos = &Front{Protocol: sluice.ProtocolOpenAIVideos, Key: jobToken, Envelope: openai.Envelope}
	FalQueue     = &Front{Protocol: sluice.ProtocolFalQueue, Key: jobToken, Envelope: falEnvelope}
	// AnthropicMessages serves Claude Code and the Anthropic SDKs: the key
	// in x-api-key (or as a bearer token), errors in Anthropic's envelope.
	// Claude Code posts to /v1/messages?beta=true: the query does not
	// change the route.
	AnthropicMessages = &Front{
		Protocol: sluice.ProtocolAnthropic, Paths: []string{anthropic.Path}, CountPath: anthropic.CountPath,
		IDHeader: "Request-Id", Key: anthropicKey, Envelope: anthropic.Envelope,
	}
)

// bearer returns the token of an "Authorization: Bearer …" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// anthropicKey returns the key of an x-api-key header, else a bearer token.
func anthropicKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	return bearer(r)
}

// falEnvelope is fal's {"detail": …}, with Sluice's code beside it.
func falEnvelope(e *sluice.Error, _ int) []byte {
	body, _ := json.Marshal(map[string]any{"detail": e.Msg, "code": e.Code})
	return body
}
