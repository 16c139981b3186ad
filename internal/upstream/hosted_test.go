package upstream

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestHostedURLs(t *testing.T) {
	azure := &sluice.Endpoint{BaseURL: "https://res.openai.azure.com/openai/", Host: sluice.Host{Cloud: sluice.CloudAzure, APIVersion: "2024-10-21"}}
	vertex := &sluice.Endpoint{BaseURL: "https://us-east5-aiplatform.googleapis.com/v1", Host: sluice.Host{Cloud: sluice.CloudVertex, Project: "p-1", Location: "us-east5"}}
	const v = "https://us-east5-aiplatform.googleapis.com/v1/projects/p-1/locations/us-east5/publishers/"
	for _, tt := range []struct {
		d    *Dialect
		ep   *sluice.Endpoint
		req  sluice.Request
		want string
	}{
		{AzureOpenAIChat, azure, sluice.Request{}, "https://res.openai.azure.com/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21"},
		{AzureOpenAIEmbeddings, azure, sluice.Request{}, "https://res.openai.azure.com/openai/deployments/my-gpt/embeddings?api-version=2024-10-21"},
		{VertexGemini, vertex, sluice.Request{Stream: true}, v + "google/models/my-gpt:streamGenerateContent?alt=sse"},
		{VertexGemini, vertex, sluice.Request{CountTokens: true}, v + "google/models/my-gpt:countTokens"},
		{VertexAnthropic, vertex, sluice.Request{}, v + "anthropic/models/my-gpt:rawPredict"},
		{VertexAnthropic, vertex, sluice.Request{Stream: true}, v + "anthropic/models/my-gpt:streamRawPredict"},
		{VertexAnthropic, vertex, sluice.Request{CountTokens: true}, ""}, // estimated by Sluice
	} {
		if got := tt.d.target(&tt.req, tt.ep, "my-gpt"); got != tt.want {
			t.Errorf("target = %q, want %q", got, tt.want)
		}
	}
}

// The hosted dialects present credentials as their clouds take them (the
// body Vertex's Anthropic takes is tested through the gateway).
func TestHostedPresentation(t *testing.T) {
	caller := http.Header{"Anthropic-Beta": {"b1"}, "Anthropic-Version": {"2023-06-01"}}
	h := http.Header{}
	AzureOpenAIChat.present(h, nil, &sluice.Credential{Secret: "az-key"})
	if h.Get("Api-Key") != "az-key" || h.Get("Authorization") != "" {
		t.Errorf("azure key: %v", h)
	}
	h = http.Header{}
	AzureOpenAIChat.presentToken(h, nil, &sluice.Credential{}, "entra-tok")
	if h.Get("Authorization") != "Bearer entra-tok" || h.Get("Api-Key") != "" {
		t.Errorf("azure token: %v", h)
	}
	h = http.Header{}
	VertexAnthropic.presentToken(h, caller, &sluice.Credential{}, "ya29")
	if h.Get("Authorization") != "Bearer ya29" || h.Get("Anthropic-Beta") != "b1" || h.Get("X-Api-Key") != "" || h.Get("Anthropic-Beta") == "oauth-2025-04-20" {
		t.Errorf("vertex anthropic token: %v", h)
	}
}

// Each cloud's throttles, refusals and billing answers are classified so
// accounts cool, credentials disable and accounts are skipped correctly.
func TestHostedErrorsClassified(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   Class
	}{
		{"azure 429", 429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}`, ClassRate},
		{"azure bad key", 401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}`, ClassAuth},
		{"azure entra token", 401, `{"error":{"code":"PermissionDenied","message":"Principal does not have access to API/Operation."}}`, ClassAuth},
		{"azure content filter", 400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, ClassRequest},
		{"vertex 429", 429, `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4.","status":"RESOURCE_EXHAUSTED"}}`, ClassRate},
		{"vertex permission", 403, `{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied on resource","status":"PERMISSION_DENIED"}}`, ClassAuth},
		{"vertex billing", 403, `{"error":{"code":403,"message":"This API method requires billing to be enabled. Please enable billing on project #123.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"BILLING_DISABLED","domain":"googleapis.com"}]}}`, ClassBilling},
		{"vertex token", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, ClassAuth},
	} {
		if got := Classify(tt.status, []byte(tt.body)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	h := http.Header{"Retry-After-Ms": {"6000"}, "Retry-After": {"6"}}
	if got := RetryAfter(h, time.Now()); got != 6*time.Second {
		t.Errorf("azure retry-after-ms: %s", got)
	}
}
