package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// withVideos is consoleCatalog where the simulator also serves OpenAI
// Videos, as the alias clip (priced per second), and Sluice polls jobs
// every 100 ms.
func withVideos(doc string) string {
	for _, r := range [][2]string{
		{"  wait_timeout: 2s\n", "  wait_timeout: 2s\n  jobs: {poll_interval: 100ms, max_poll_interval: 300ms}\n"},
		{"protocols: [openai.chat]}", "protocols: [openai.chat, openai.videos]}"},
		{"models:\n", "models:\n  - alias: clip\n    protocol: openai.videos\n    deployments: [{model: sora-2, endpoints: [sim]}]\n"},
		{"        - {alias: fast,", `        - {alias: clip, video_second: "0.10", effective_from: "2020-01-01T00:00:00Z"}` + "\n        - {alias: fast,"},
		{"    - {model: gpt-4o-mini,", `    - {model: sora-2, video_second: "0.05", effective_from: "2020-01-01T00:00:00Z"}` + "\n    - {model: gpt-4o-mini,"},
	} {
		doc = strings.Replace(doc, r[0], r[1], 1)
	}
	return doc
}

// TestBrowserJobsListAndTimeline: a video job submitted through the data
// plane shows in the list; its page shows the credential and account it is
// bound to, as the admin API says, and follows it to completed with its
// timeline.
func TestBrowserJobsListAndTimeline(t *testing.T) {
	g := startStoredGateway(t, withVideos)
	if status, body := adminCall(t, g, "POST", "/admin/billing/accounts/acme/topup", writeToken, `{"amount": "10"}`, nil); status != http.StatusOK {
		t.Fatalf("top up acme: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.gw.Addr()+"/v1/videos",
		strings.NewReader(`{"model": "clip", "prompt": "a red kite over dunes", "seconds": "4"}`))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var video struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&video)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || video.ID == "" {
		t.Fatalf("create video = %d (%v), want a job", resp.StatusCode, err)
	}

	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	visit(t, ctx, "jobs", "#jobs-list")
	waitText(t, ctx, "#jobs-list", video.ID, testWait)
	waitText(t, ctx, "#jobs-list", "clip", testWait)
	checkA11y(t, ctx, "jobs")
	shot(t, ctx, "jobs-en")

	run(t, ctx, "open the job", chromedp.Click(chromedp.CSS(`#jobs-list a`)), chromedp.WaitVisible(chromedp.CSS(`#job-timeline`)))
	waitText(t, ctx, "#job", "Completed", testWait)
	waitText(t, ctx, "#job-timeline", "Ended", testWait)
	_, body := adminCall(t, g, "GET", "/admin/jobs/"+video.ID, writeToken, "", nil)
	var job struct {
		CredentialID string `json:"credential_id"`
		AccountID    string `json:"account_id"`
		UpstreamID   string `json:"upstream_id"`
	}
	if err := json.Unmarshal([]byte(body), &job); err != nil || job.CredentialID == "" {
		t.Fatalf("GET /admin/jobs/%s = %s", video.ID, body)
	}
	for _, want := range []string{job.CredentialID, job.AccountID, job.UpstreamID} {
		waitText(t, ctx, "#job", want, testWait)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#job-timeline li').length`); n < 3 {
		t.Errorf("timeline steps of a completed job: %d, want queued, submitted (running) and ended", n)
	}
	checkA11y(t, ctx, "job")
	shot(t, ctx, "job-en")

	chooseLanguage(t, ctx, "zh")
	waitText(t, ctx, "#job", "已完成", testWait)
	shot(t, ctx, "job-zh")
	visit(t, ctx, "jobs", "#jobs-list")
	waitText(t, ctx, "#jobs-list caption", "异步任务", testWait)
	shot(t, ctx, "jobs-zh")
	chooseLanguage(t, ctx, "en")
}
