package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   Class
	}{
		{"rate limit", 429, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, ClassRate},
		{"bare 429", 429, ``, ClassRate},
		{"openai insufficient quota", 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`, ClassBilling},
		{"invalid key", 401, `{"error":{"message":"Incorrect API key provided: sk-ab***cd.","type":"invalid_request_error","code":"invalid_api_key"}}`, ClassAuth},
		{"account deactivated", 401, `{"error":{"message":"deactivated","type":"invalid_request_error","code":"account_deactivated"}}`, ClassBilling},
		{"forbidden", 403, `{"error":{"message":"no access","type":"invalid_request_error","code":null}}`, ClassAuth},
		{"region", 403, `{"error":{"message":"Country not supported","code":"unsupported_country_region_territory"}}`, ClassEndpoint},
		{"anthropic credit", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, ClassBilling},
		{"payment required", 402, `{}`, ClassBilling},
		{"server error", 500, `{"error":{"message":"oops","type":"server_error","code":null}}`, ClassEndpoint},
		{"cloudflare", 522, `<html>timeout</html>`, ClassEndpoint},
		{"overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, ClassEndpoint},
		{"bad request", 400, `{"error":{"message":"context length exceeded","type":"invalid_request_error","code":"context_length_exceeded"}}`, ClassRequest},
		{"not found", 404, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`, ClassRequest},
		{"too large", 413, `<html>413</html>`, ClassRequest},
		{"numeric code", 500, `{"error":{"message":"x","code":500}}`, ClassEndpoint},
		{"anthropic rate", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, ClassRate},
		{"anthropic billing", 402, `{"type":"error","error":{"type":"billing_error","message":"payment"}}`, ClassBilling},
		{"anthropic auth", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, ClassAuth},
		{"dashscope native rate", 429, `{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded, please try again later.","request_id":"x"}`, ClassRate},
		{"dashscope burst", 429, `{"error":{"message":"Request rate increased too quickly. To ensure system stability, please adjust your client logic to scale requests more smoothly over time.","type":"limit_burst_rate","code":"limit_burst_rate"}}`, ClassRate},
		{"dashscope allocation quota", 429, `{"code":"Throttling.AllocationQuota","message":"Allocated quota exceeded, please increase your quota limit."}`, ClassRate},
		{"dashscope free quota", 429, `{"code":"Throttling.AllocationQuota","message":"Free allocated quota exceeded."}`, ClassBilling},
		{"dashscope throttling on 400", 400, `{"code":"Throttling","message":"Requests throttling triggered."}`, ClassRate},
		{"dashscope arrearage", 400, `{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing."}`, ClassBilling},
		{"dashscope overdue", 429, `{"code":"PrepaidBillOverdue","message":"The prepaid bill is overdue."}`, ClassBilling},
		{"fal locked", 403, `{"detail":"User is locked. Reason: Exhausted balance. Top up your balance at fal.ai/dashboard/billing"}`, ClassBilling},
		{"fal validation", 422, `{"detail":[{"loc":["body","prompt"],"msg":"field required","type":"value_error.missing"}]}`, ClassRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.status, []byte(tt.body)); got != tt.want {
				t.Errorf("Classify(%d, %s) = %v, want %v", tt.status, tt.body, got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		give map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fraction", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"ms wins", map[string]string{"Retry-After": "3", "Retry-After-Ms": "644"}, 644 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-2"}, 0},
		{"huge", map[string]string{"Retry-After": "1e308"}, maxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.give {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter(%v) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestExhausted(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		give map[string]string
		want time.Duration
	}{
		{"room left", map[string]string{"X-Ratelimit-Remaining-Requests": "12", "X-Ratelimit-Reset-Requests": "6s"}, 0},
		{"openai empty", map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1m30s"}, 90 * time.Second},
		{"openai empty, no reset", map[string]string{"X-Ratelimit-Remaining-Requests": "0"}, 0},
		{"openai empty, resetting now", map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "0s"}, 0},
		{"anthropic empty", map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": now.Add(4 * time.Second).Format(time.RFC3339)}, 4 * time.Second},
		{"anthropic output tokens empty", map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "40", "Anthropic-Ratelimit-Output-Tokens-Remaining": "0",
			"Anthropic-Ratelimit-Output-Tokens-Reset": now.Add(9 * time.Second).Format(time.RFC3339)}, 9 * time.Second},
		{"anthropic tokens and requests empty: the later reset", map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Requests-Reset": now.Add(4 * time.Second).Format(time.RFC3339),
			"Anthropic-Ratelimit-Tokens-Remaining": "0", "Anthropic-Ratelimit-Tokens-Reset": now.Add(20 * time.Second).Format(time.RFC3339)}, 20 * time.Second},
		{"anthropic tokens left", map[string]string{"Anthropic-Ratelimit-Tokens-Remaining": "12000",
			"Anthropic-Ratelimit-Tokens-Reset": now.Add(9 * time.Second).Format(time.RFC3339)}, 0},
		{"none", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.give {
				h.Set(k, v)
			}
			if got := Exhausted(h, now); got != tt.want {
				t.Errorf("Exhausted(%v) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0.5", "Sun, 29 Nov 2026 12:00:07 GMT", "soon", "-2", "1e308", "NaN"} {
		f.Add(s, s)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{"Retry-After": {ra}, "Retry-After-Ms": {ms}}
		if got := RetryAfter(h, now); got < 0 || got > maxRetryAfter {
			t.Fatalf("RetryAfter(%q, %q) = %v, want >= 0", ra, ms, got)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add(429, `{"error":{"code":"rate_limit_exceeded"}}`)
	f.Add(401, `{"error":{"code":"invalid_api_key"}}`)
	f.Add(500, `<html>`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		c := Classify(status, []byte(body))
		if c == ClassNone || c == ClassCallerGone {
			t.Fatalf("Classify(%d, %q) = %v: a failure must get a failure class", status, body, c)
		}
	})
}
