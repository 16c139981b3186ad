package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Azure OpenAI: POST /openai/deployments/{deployment}/chat/completions and
// …/embeddings, each with ?api-version= (without one: 404, as Azure
// answers an unknown version). The credential is the resource's key in
// api-key, or an Entra ID access token (Authorization: Bearer) that the
// token endpoint issued for a registered application's client_credentials
// grant. The body is OpenAI's; the deployment is the model (a "model" in
// the body is ignored, as Azure does). Answers, streams, usage, 429s
// (retry-after, retry-after-ms, x-ratelimit-remaining-requests) and errors
// are then OpenAI's, as Azure's nearly are.

// azureFail answers in Azure's own error shape, for what Azure checks
// before the model: {"error":{"code":"404","message":…}}.
func azureFail(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": strconv.Itoa(status), "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// serveAzure serves an Azure OpenAI deployment path.
func (s *Simulator) serveAzure(w http.ResponseWriter, r *http.Request) {
	body, ok := s.hostedBody(w, r)
	if !ok {
		return
	}
	deployment, op, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), "/")
	native := map[string]string{"chat/completions": "/v1/chat/completions", "embeddings": "/v1/embeddings"}[op]
	switch {
	case r.Method != http.MethodPost || deployment == "" || native == "" || r.URL.Query().Get("api-version") == "":
		azureFail(w, http.StatusNotFound, "Resource not found")
		return
	}
	key := strings.TrimSpace(r.Header.Get("Api-Key"))
	if key == "" {
		if key = bearer(r); key != "" && !s.cloudToken(key) {
			azureFail(w, http.StatusUnauthorized, "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.")
			return
		}
	}
	if key == "" {
		azureFail(w, http.StatusUnauthorized, "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		fields["model"], _ = json.Marshal(deployment)
		body, _ = json.Marshal(fields)
	}
	r.Header.Del("Api-Key")
	r.Header.Set("Authorization", "Bearer "+key)
	s.native(w, r, native, "", body)
}
