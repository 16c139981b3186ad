package upstream

import "testing"

func TestModelScoped(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"OpenAIPerModelTPM", `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199000, Requested 2000. Please try again in 644ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, true},
		{"OpenAIWithoutModel", `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, false},
		{"DashScopeNativeRPM", `{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded, please try again later.","request_id":"r1"}`, true},
		{"DashScopeNativeTPM", `{"code":"Throttling.AllocationQuota","message":"Allocated quota exceeded, please increase your quota limit.","request_id":"r1"}`, true},
		{"DashScopeBurst", `{"code":"Throttling.BurstRate","message":"Request rate increased too quickly."}`, true},
		{"DashScopeCompatRPM", `{"error":{"message":"You exceeded your current requests list.","type":"limit_requests","code":"limit_requests"}}`, true},
		{"DashScopeCompatTPM", `{"error":{"message":"Allocated quota exceeded, please increase your quota limit.","type":"insufficient_quota","code":"insufficient_quota"}}`, true},
		{"DashScopeBareThrottle", `{"code":"Throttling","message":"Requests throttling triggered."}`, false},
		{"AnthropicOrgLimit", `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization"}}`, false},
		{"NotJSON", `<html>429 Too Many Requests</html>`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := Classify(429, []byte(tt.body)); c != ClassRate {
				t.Fatalf("Classify = %s, want rate", c)
			}
			if e := decodeError([]byte(tt.body)); e.modelScoped() != tt.want {
				t.Errorf("modelScoped = %v, want %v", !tt.want, tt.want)
			}
		})
	}
}
