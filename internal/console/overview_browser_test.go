package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

// TestBrowserOverviewCountsRequests: after three chat requests through
// the data plane and one that every upstream fails, the overview shows the
// four requests, the failure's error code, the tokens the usage summary
// adds up, and what is serving: the catalog and its accounts by status.
func TestBrowserOverviewCountsRequests(t *testing.T) {
	g := startGateway(t)
	topUp(t, g)
	for range 3 {
		if status, body := chat(t, g, keyWeb, "fast"); status != http.StatusOK {
			t.Fatalf("chat = %d %s", status, body)
		}
	}
	for _, secret := range []string{upstreamA1, upstreamA2, upstreamB1} {
		g.sim.SetKey(secret, simulator.Behavior{FailStatus: http.StatusInternalServerError})
	}
	if status, _ := chat(t, g, keyWeb, "fast"); status == http.StatusOK {
		t.Fatal("chat with every upstream failing = 200")
	}
	var summary struct {
		Total struct {
			Requests         int              `json:"requests"`
			Errors           map[string]int64 `json:"errors"`
			PromptTokens     int64            `json:"prompt_tokens"`
			CompletionTokens int64            `json:"completion_tokens"`
		} `json:"total"`
	}
	// The usage records are written a moment after the answers.
	for deadline := time.Now().Add(testWait); ; time.Sleep(100 * time.Millisecond) {
		_, body := adminCall(t, g, "GET", "/admin/usage/summary", writeToken, "", nil)
		err := json.Unmarshal([]byte(body), &summary)
		if err == nil && summary.Total.Requests == 4 && len(summary.Total.Errors) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the usage summary is %s (%v), want 4 requests, one failed", body, err)
		}
	}

	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "overview", `#overview-serving dl`)
	waitText(t, ctx, "#stat-requests", "4", testWait)
	waitText(t, ctx, "#stat-errors", "1 (25%)", testWait)
	for code, n := range summary.Total.Errors {
		waitText(t, ctx, "#overview-errors", fmt.Sprint(code, n), testWait)
	}
	waitText(t, ctx, "#stat-tokens", fmt.Sprint(summary.Total.PromptTokens+summary.Total.CompletionTokens), testWait)
	waitText(t, ctx, "#overview-buckets tbody tr:last-child td:nth-child(2)", "4", testWait)
	waitText(t, ctx, "#overview-counts", "Upstream accounts", testWait)
	waitText(t, ctx, "#overview-counts", "active: 2", testWait)
	waitText(t, ctx, "#overview-counts", "active: 3", testWait) // the credentials
	checkA11y(t, ctx, "overview")
	shot(t, ctx, "overview-en")
	inChinese(t, ctx, "overview", "#overview-usage", "请求数")
}
