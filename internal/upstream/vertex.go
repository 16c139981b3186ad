package upstream

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// VertexGemini and VertexAnthropic are Gemini's generateContent and
// Anthropic's Messages hosted on Google Vertex AI, under the endpoint's
// project and location (its vertex block):
// {base}/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent
// (:streamGenerateContent?alt=sse, :countTokens) with Gemini's body as it
// is, and …/publishers/anthropic/models/{m}:rawPredict (:streamRawPredict)
// with the Messages body less its "model" and with the Vertex version in
// "anthropic_version" (the caller's anthropic-version header does not
// apply there; its anthropic-beta does). Vertex takes a bearer access
// token: an oauth credential of grant jwt_bearer (a service account's key)
// gets them, or a static secret holds one. Usage, streams and their ends
// are the protocols' own; errors are Google's envelope (Classify).
// Anthropic's count_tokens is not offered on Vertex: Sluice estimates it.
var (
	VertexGemini = Hosted(GeminiGenerate, Hosting{
		URL: vertexGeminiURL, Authorize: vertexAuth,
	})
	VertexAnthropic = Hosted(AnthropicMessages, Hosting{
		URL: vertexAnthropicURL, Authorize: vertexAnthropicAuth, Finish: vertexAnthropicBody,
	})
)

// vertexModel is the URL of model, published by publisher, on endpoint ep:
// a base URL written with /v1 keeps it once.
func vertexModel(ep *sluice.Endpoint, publisher, model string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(ep.BaseURL, "/"), "/v1")
	return base + "/v1/projects/" + url.PathEscape(ep.Host.Project) + "/locations/" + url.PathEscape(ep.Host.Location) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(model)
}

// vertexGeminiURL is the URL of req to a Gemini model: the methods of the
// Gemini API on the model's Vertex name.
func vertexGeminiURL(req *sluice.Request, ep *sluice.Endpoint, model string) string {
	switch {
	case req.CountTokens:
		return vertexModel(ep, "google", model) + ":countTokens"
	case req.Stream:
		return vertexModel(ep, "google", model) + ":streamGenerateContent?alt=sse"
	}
	return vertexModel(ep, "google", model) + ":generateContent"
}

// vertexAnthropicURL is the URL of req to a Claude model: rawPredict, or
// streamRawPredict for a stream (whose events are Anthropic's).
func vertexAnthropicURL(req *sluice.Request, ep *sluice.Endpoint, model string) string {
	switch {
	case req.CountTokens:
		return ""
	case req.Stream:
		return vertexModel(ep, "anthropic", model) + ":streamRawPredict"
	}
	return vertexModel(ep, "anthropic", model) + ":rawPredict"
}

// vertexAuth presents a secret or a token as a Google access token.
func vertexAuth(h, _ http.Header, token string) {
	h["Authorization"] = []string{"Bearer " + token}
}

// vertexAnthropicAuth presents a Google access token and passes on the
// caller's Anthropic betas.
func vertexAnthropicAuth(h, caller http.Header, token string) {
	h["Authorization"] = []string{"Bearer " + token}
	if v := caller["Anthropic-Beta"]; len(v) > 0 {
		h["Anthropic-Beta"] = v
	}
}

// vertexAnthropicVersion is the Messages version Vertex takes, in the body.
var vertexAnthropicVersion = []byte(`"vertex-2023-10-16"`)

// vertexAnthropicBody makes a Messages body Vertex's: no "model" (the
// URL names it; Vertex refuses one in the body) and its anthropic_version.
func vertexAnthropicBody(_ *sluice.Request, _ *sluice.Endpoint, _ string, body []byte) ([]byte, error) {
	body, err := jsonfield.Delete(body, "model")
	if err != nil {
		return nil, err
	}
	return jsonfield.Set(body, "anthropic_version", vertexAnthropicVersion)
}
