package upstream

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestGeminiPaths(t *testing.T) {
	tests := []struct {
		d    *Dialect
		req  sluice.Request
		base string
		want string
	}{
		{GeminiGenerate, sluice.Request{}, "https://g.example", "https://g.example/v1beta/models/m:generateContent"},
		{GeminiGenerate, sluice.Request{Stream: true}, "https://g.example/v1beta/", "https://g.example/v1beta/models/m:streamGenerateContent?alt=sse"},
		{GeminiGenerate, sluice.Request{CountTokens: true}, "https://g.example", "https://g.example/v1beta/models/m:countTokens"},
		{GeminiEmbed, sluice.Request{}, "https://g.example", "https://g.example/v1beta/models/m:embedContent"},
		{GeminiEmbed, sluice.Request{Batch: true}, "https://g.example", "https://g.example/v1beta/models/m:batchEmbedContents"},
		{OpenAIChat, sluice.Request{}, "https://o.example/v1", "https://o.example/v1/chat/completions"},
	}
	for _, tt := range tests {
		if got := dialectURL(tt.base, tt.d.path(&tt.req, "m")); got != tt.want {
			t.Errorf("URL of %+v on %s = %s, want %s", tt.req, tt.base, got, tt.want)
		}
	}
	if GeminiEmbed.path(&sluice.Request{CountTokens: true}, "m") != "" {
		t.Error("an embedding model has a count")
	}
	h := http.Header{}
	geminiAuth(h, nil, "secret")
	if h.Get("X-Goog-Api-Key") != "secret" || h.Get("Authorization") != "" {
		t.Errorf("geminiAuth set %v", h)
	}
}

func TestGeminiClassify(t *testing.T) {
	perMinute := `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. Please retry in 26.3s.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`
	perDay := strings.Replace(strings.Replace(perMinute, "PerMinute", "PerDay", 1), `"26s"`, `"3s"`, 1)
	tests := []struct {
		status int
		body   string
		want   Class
	}{
		{429, perMinute, ClassRate},
		{429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, ClassRate},
		{429, `{"error":{"code":429,"message":"Your prepayment credits are depleted.","status":"RESOURCE_EXHAUSTED"}}`, ClassBilling},
		{400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, ClassAuth},
		{400, `{"error":{"code":400,"message":"User location is not supported for the API use without a billing account linked.","status":"FAILED_PRECONDITION"}}`, ClassBilling},
		{400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT"}}`, ClassRequest},
		{403, `{"error":{"code":403,"message":"The caller does not have permission","status":"PERMISSION_DENIED"}}`, ClassAuth},
		{404, `{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`, ClassRequest},
		{503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, ClassEndpoint},
		{500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, ClassEndpoint},
	}
	for _, tt := range tests {
		if got := Classify(tt.status, []byte(tt.body)); got != tt.want {
			t.Errorf("Classify(%d, %s) = %v, want %v", tt.status, tt.body, got, tt.want)
		}
	}
	now := time.Date(2026, 3, 10, 20, 0, 0, 0, time.UTC) // 12:00 PST
	if got := retryAfterOf(perMinute, now); got != 26*time.Second {
		t.Errorf("per-minute retry = %v, want the RetryInfo's 26s", got)
	}
	if got := retryAfterOf(strings.Replace(perMinute, `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}`, "", 1), now); got != 26300*time.Millisecond {
		t.Errorf("retry from the message = %v, want 26.3s", got)
	}
	if got := retryAfterOf(perDay, now); got != 12*time.Hour {
		t.Errorf("per-day retry = %v, want until midnight Pacific (12h)", got)
	}
	// A detail that does not decode says nothing; the others still count.
	if got := retryAfterOf(strings.Replace(perMinute, `"details":[`, `"details":[5,{"reason":7},`, 1), now); got != 26*time.Second {
		t.Errorf("retry beside undecodable details = %v, want the RetryInfo's 26s", got)
	}
}

// retryAfterOf is the wait that the rejected answer body asks for.
func retryAfterOf(body string, now time.Time) time.Duration {
	e := decodeError([]byte(body))
	return e.googleRetryAfter(now)
}

// TestClassifyRejection: one read of a rejected answer gives its class,
// its model scope and its wait, and only Google's envelope is read for a
// wait ("retry in" in another provider's message is not one).
func TestClassifyRejection(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		header      http.Header
		body        string
		class       Class
		modelScoped bool
		wait        time.Duration
	}{
		{"GeminiPerMinute", 429, nil, `{"error":{"code":429,"message":"Please retry in 26.3s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`, ClassRate, false, 26 * time.Second},
		{"HeaderFirst", 429, http.Header{"Retry-After": {"3"}}, `{"error":{"code":429,"message":"Please retry in 26.3s.","status":"RESOURCE_EXHAUSTED"}}`, ClassRate, false, 3 * time.Second},
		{"OpenAIPerModel", 429, nil, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM). Please retry in 2s.","type":"tokens","code":"rate_limit_exceeded"}}`, ClassRate, true, 0},
		{"NotWhole", 429, nil, `{"error":{"message":"Please retry in 2s.","status":"RESOURCE_EXHAUSTED","code":429,"type":1},"code":"Throttling.RateQuota"}`, ClassRate, false, 0},
		{"NotRate", 503, nil, `{"error":{"code":503,"message":"Please retry in 2s.","status":"UNAVAILABLE"}}`, ClassEndpoint, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Attempt
			classifyRejection(&a, &http.Response{StatusCode: tt.status, Header: tt.header}, []byte(tt.body))
			if a.Class != tt.class || a.ModelScoped != tt.modelScoped || a.RetryAfter != tt.wait {
				t.Errorf("class %v, model-scoped %v, wait %v; want %v, %v, %v", a.Class, a.ModelScoped, a.RetryAfter, tt.class, tt.modelScoped, tt.wait)
			}
		})
	}
}
