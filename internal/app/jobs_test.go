package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/sqlledger"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sqldb"
	"github.com/sluicehq/sluice/internal/testenv"
)

// jobsTemplate: OpenAI Videos on simA (account org-v: three credentials,
// two jobs at once) and the fal queue on simB (account org-f, one
// credential). The poller looks every 100 ms, backing off to 300 ms.
const jobsTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: ADMIN_TOKEN
  wait_timeout: 20s
  timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
  jobs: {max_age: 1m, poll_interval: 100ms, max_poll_interval: 300ms, retention: 1h}
database: {url: "sqlite://%s"}
state: %s
endpoints:
  - {id: ep-v, base_url: %s, protocols: [openai.videos]}
  - {id: ep-f, base_url: %s, protocols: [fal.queue]}
accounts:
  - {id: org-v, max_inflight: 2, cooldown: {base: 500ms, max: 2s}}
  - {id: org-f, max_inflight: 2, cooldown: {base: 500ms, max: 2s}}
credentials:
  - {id: v1, account: org-v, secret_env: V1, endpoints: [ep-v]}
  - {id: v2, account: org-v, secret_env: V2, endpoints: [ep-v]}
  - {id: v3, account: org-v, secret_env: V3, endpoints: [ep-v]}
  - {id: f1, account: org-f, secret_env: F1, endpoints: [ep-f]}
models:
  - alias: sora
    protocol: openai.videos
    deployments: [{model: sora-2, endpoints: [ep-v]}]
  - alias: veo
    protocol: fal.queue
    deployments: [{model: fal-ai/veo3/fast, endpoints: [ep-f]}]
keys:
  - {id: web, tenant: web, secret_env: KEY_WEB}
  - {id: other, tenant: other, secret_env: KEY_BG}
`

const jobDuration = 600 * time.Millisecond

func init() {
	for _, id := range []string{"v1", "v2", "v3", "v9", "f1"} {
		testEnv[strings.ToUpper(id)] = upstreamKey(id)
	}
}

// simJobs: both providers enforce their account's two jobs at once (a 429
// past it) and run each job for jobDuration.
func simJobs(account string, ids ...string) simulator.Options {
	o := simulator.Options{Accounts: map[string]simulator.AccountLimits{account: {MaxInflight: 2}}, Keys: map[string]simulator.Behavior{}}
	for _, id := range ids {
		o.Keys[upstreamKey(id)] = simulator.Behavior{Account: account, JobDuration: jobDuration}
	}
	return o
}

func newJobsHarness(t *testing.T, template, state string) *harness {
	t.Helper()
	h := newHarnessWith(t, template, state, simJobs("org-v", "v1", "v2", "v3"))
	h.simB.Close()
	h.srvB.Config.Handler = simulator.New(simJobs("org-f", "f1"))
	h.simB = h.srvB.Config.Handler.(*simulator.Simulator)
	return h
}

// call sends a request to the gateway at addr and decodes a JSON answer
// into v (when v is not nil).
func call(t *testing.T, method, url, auth, body string, v any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, v); err != nil {
			t.Errorf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

type video struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

const videoBody = `{"model":"sora","prompt":"a red kite over dunes at dusk","seconds":"4"}`

// restart stops the gateway and starts another on the same catalog — the
// same database and shared state — in its place.
func (h *harness) restart(t *testing.T) {
	t.Helper()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	h.gw = h.another(t)
}

// another starts one more gateway on the harness's catalog (a replica, with
// Redis state), closed when the test ends.
func (h *harness) another(t *testing.T) *app.Gateway {
	t.Helper()
	gw, err := app.Start(context.Background(), app.Options{
		ConfigPath: h.cfgPath, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return gw
}

// submitVideo submits videoBody with the web key and fails the test unless
// Sluice answers with a job.
func (h *harness) submitVideo(t *testing.T) video {
	t.Helper()
	var v video
	if code, body := call(t, "POST", h.url("/v1/videos"), "Bearer "+keyWeb, videoBody, &v); code != 200 {
		t.Fatalf("submit = %d %s", code, body)
	}
	return v
}

// submits lists the video submits simA received, in arrival order.
func submits(sim *simulator.Simulator) []simulator.Recorded {
	var out []simulator.Recorded
	for _, r := range sim.Requests() {
		if r.Path == "/v1/videos" {
			out = append(out, r)
		}
	}
	return out
}

// TestJobsHoldAccountSlotsUntilTheyEnd: one account with two slots and three
// credentials, five submits, nobody polls: at most two jobs run upstream at
// once, the third is submitted only when a job has ended (learned by the
// background poller), no credential is refused, and every slot comes back.
func TestJobsHoldAccountSlotsUntilTheyEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newJobsHarness(t, jobsTemplate, state)
		ids := make([]string, 5)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				var v video
				if code, body := call(t, "POST", h.url("/v1/videos"), "Bearer "+keyWeb, videoBody, &v); code != 200 {
					t.Errorf("submit %d = %d %s", i, code, body)
				}
				ids[i] = v.ID
			})
		}
		wg.Wait()
		subs := submits(h.simA)
		if len(subs) != 5 {
			t.Fatalf("upstream saw %d submits, want 5", len(subs))
		}
		for _, r := range subs {
			if r.Status != 200 {
				t.Errorf("upstream answered a submit %d (with %s): a credential was tried past the account's two slots", r.Status, r.Key)
			}
		}
		if third, first := subs[2].At, subs[0].At; third.Sub(first) < jobDuration-50*time.Millisecond {
			t.Errorf("the third job was submitted %v after the first, before any job could end (%v)", third.Sub(first), jobDuration)
		}
		if peak := h.simA.MaxInFlight("org-v"); peak > 2 {
			t.Errorf("org-v ran %d jobs at once, want at most 2", peak)
		}
		for _, id := range ids {
			if !strings.HasPrefix(id, "video_") || slices.ContainsFunc(subs, func(r simulator.Recorded) bool { return strings.Contains(id, r.Key) }) {
				t.Errorf("job id %q is not one of Sluice's own", id)
			}
		}
		eventually(t, 5*time.Second, "every job ends and frees its slot", func() bool { return h.claimsHeld(t) == 0 })
		recs := h.usage(t, 10) // five submits and five jobs
		jobs := 0
		for _, r := range recs {
			if r.Job != nil {
				jobs++
				if r.Job.State != "completed" || r.Job.Submitted.IsZero() || r.Job.Ended.Before(r.Job.Submitted) || len(r.Executions) != 1 ||
					r.Executions[0].AccountID != "org-v" || !slices.Contains(ids, r.RequestID) {
					t.Errorf("job usage record = %+v %+v", r, r.Job)
				}
			}
		}
		if jobs != 5 {
			t.Errorf("%d job usage records, want 5", jobs)
		}
		if _, m := h.adminGet("/metrics"); !strings.Contains(m, `sluice_jobs_ended_total{protocol="openai.videos",state="completed"} 5`) {
			t.Errorf("metrics lack the five completed jobs:\n%s", m)
		}
	})
}

// TestJobFollowUpsStayOnTheCreatingCredential: every poll and the download
// go to the credential that created the job, also after it is disabled;
// the disabled credential gets no new submits; the caller never sees the
// upstream's job ID.
func TestJobFollowUpsStayOnTheCreatingCredential(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	auth := "Bearer " + keyWeb
	v := h.submitVideo(t)
	creator := submits(h.simA)[0].Key
	cred := strings.TrimSuffix(strings.TrimPrefix(creator, "sk-upstream-"), "-SECRET-2b7c")
	h.adminPost(t, "/admin/credentials/"+cred+"/disable")
	for v.Status != "completed" {
		var got video
		code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got)
		if code != 200 || got.ID != v.ID {
			t.Fatalf("poll = %d %s", code, body)
		}
		v.Status = got.Status
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID+"/content"), auth, "", nil); code != 200 || !strings.Contains(body, "ftyp") {
		t.Fatalf("content = %d %.80q", code, body)
	}
	var next video
	if code, body := call(t, "POST", h.url("/v1/videos"), auth, videoBody, &next); code != 200 {
		t.Fatalf("second submit = %d %s", code, body)
	}
	if subs := submits(h.simA); subs[1].Key == creator {
		t.Errorf("the disabled credential %s got a new submit", cred)
	}
	followUps := 0
	for _, r := range h.simA.Requests() {
		switch {
		case strings.HasPrefix(r.Path, "/v1/videos/"):
			followUps++
			if r.Key != creator {
				t.Errorf("%s went to %s, not to the job's credential %s", r.Path, r.Key, creator)
			}
		}
	}
	if followUps < 2 {
		t.Errorf("upstream saw %d follow-ups, want the polls and the download", followUps)
	}
	for _, r := range h.simA.Requests() {
		if strings.HasPrefix(r.Path, "/v1/videos/video_") && strings.Contains(r.Path, v.ID) {
			t.Errorf("Sluice's job ID reached the upstream: %s", r.Path)
		}
	}
}

// TestJobsAreVisibleOnlyToTheirKey: another key, an unknown ID and the other
// protocol's paths all get the same 404.
func TestJobsAreVisibleOnlyToTheirKey(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	v := h.submitVideo(t)
	for _, tc := range []struct{ method, path, auth string }{
		{"GET", "/v1/videos/" + v.ID, "Bearer " + testEnv["KEY_BG"]},
		{"GET", "/v1/videos/" + v.ID + "/content", "Bearer " + testEnv["KEY_BG"]},
		{"DELETE", "/v1/videos/" + v.ID, "Bearer " + testEnv["KEY_BG"]},
		{"GET", "/v1/videos/video_00000000000000000000000000000000", "Bearer " + keyWeb},
		{"GET", "/fal/requests/" + v.ID + "/status", "Key " + keyWeb},
	} {
		code, body := call(t, tc.method, h.url(tc.path), tc.auth, "", nil)
		if code != 404 || !strings.Contains(body, "not_found") {
			t.Errorf("%s %s = %d %s, want 404 not_found", tc.method, tc.path, code, body)
		}
	}
	if n := len(h.simA.Requests()); n != 1 {
		t.Errorf("upstream saw %d requests, want only the submit", n)
	}
	// An alias of one family is not served through the other's API.
	if code, body := call(t, "POST", h.url("/fal/sora"), "Key "+keyWeb, `{"prompt":"x"}`, nil); code != 404 || !strings.Contains(body, "model_not_found") {
		t.Errorf("fal submit of an OpenAI Videos alias = %d %s, want 404 model_not_found", code, body)
	}
	if code, body := call(t, "POST", h.url("/v1/videos"), "Bearer "+keyWeb, `{"model":"veo","prompt":"x"}`, nil); code != 404 || !strings.Contains(body, "model_not_found") {
		t.Errorf("video submit of a fal alias = %d %s, want 404 model_not_found", code, body)
	}
}

type falStatus struct {
	Status      string `json:"status"`
	RequestID   string `json:"request_id"`
	StatusURL   string `json:"status_url"`
	ResponseURL string `json:"response_url"`
	CancelURL   string `json:"cancel_url"`
}

// TestFalQueueJob: a fal submit answers with Sluice's request ID and URLs;
// status, result and cancel go through them to the creating key.
func TestFalQueueJob(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	auth := "Key " + keyWeb
	var sub falStatus
	if code, body := call(t, "POST", h.url("/fal/veo"), auth, `{"prompt":"a kite"}`, &sub); code != 200 {
		t.Fatalf("submit = %d %s", code, body)
	}
	upstreamID := ""
	for _, r := range h.simB.Requests() {
		if r.Path == "/fal-ai/veo3/fast" && r.Status == 200 {
			upstreamID = "?" // found below from the follow-ups
		}
	}
	if upstreamID == "" {
		t.Fatalf("upstream saw no submit to /fal-ai/veo3/fast: %+v", h.simB.Requests())
	}
	if !strings.HasPrefix(sub.StatusURL, h.url("/fal/requests/"+sub.RequestID)) || !strings.HasPrefix(sub.ResponseURL, h.url("/fal/")) ||
		!strings.HasSuffix(sub.CancelURL, "/cancel") {
		t.Fatalf("submit answer = %+v, want Sluice's URLs", sub)
	}
	st := sub
	for st.Status != "COMPLETED" {
		code, body := call(t, "GET", st.StatusURL, auth, "", &st)
		if code != 200 || st.RequestID != sub.RequestID {
			t.Fatalf("status = %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := call(t, "GET", sub.ResponseURL, auth, "", nil)
	if code != 200 || !strings.Contains(body, "video") {
		t.Fatalf("result = %d %s", code, body)
	}
	for _, r := range h.simB.Requests() {
		if r.Key != upstreamKey("f1") {
			t.Errorf("%s went with key %q", r.Path, r.Key)
		}
		if strings.Contains(r.Path, "/requests/") {
			upstreamID = strings.Split(strings.SplitAfter(r.Path, "/requests/")[1], "/")[0]
		}
	}
	if upstreamID == "?" || upstreamID == sub.RequestID {
		t.Errorf("upstream request ID %q: want one distinct from Sluice's %q", upstreamID, sub.RequestID)
	}

	// Cancel a running job: its slot comes back at once.
	var run falStatus
	if code, body := call(t, "POST", h.url("/fal/veo"), auth, `{"prompt":"another"}`, &run); code != 200 {
		t.Fatalf("second submit = %d %s", code, body)
	}
	if code, body := call(t, "PUT", run.CancelURL, auth, "", nil); code != 202 || !strings.Contains(body, "CANCELLATION_REQUESTED") {
		t.Fatalf("cancel = %d %s", code, body)
	}
	if h.simB.Jobs(upstreamKey("f1")) != 0 {
		t.Error("the cancelled job still runs upstream")
	}
	eventually(t, 2*time.Second, "the cancelled job frees its slot", func() bool { return h.claimsHeld(t) == 0 })
}

// TestJobPastItsMaxAgeFreesItsSlot: jobs whose end is never learned (they
// outlive server.jobs.max_age) are ended as expired and free their slots,
// so a waiting submit goes through.
func TestJobPastItsMaxAgeFreesItsSlot(t *testing.T) {
	tpl := strings.Replace(jobsTemplate, "max_age: 1m", "max_age: 500ms", 1)
	h := newJobsHarness(t, tpl, "{backend: memory}")
	// The provider has no cap here: expired jobs may still run upstream, and
	// it is Sluice's slots that are under test.
	h.simA.Close()
	h.simA = simulator.New(simulator.Options{Keys: map[string]simulator.Behavior{
		upstreamKey("v1"): {JobDuration: time.Hour}, upstreamKey("v2"): {JobDuration: time.Hour}, upstreamKey("v3"): {JobDuration: time.Hour},
	}})
	h.srvA.Config.Handler = h.simA
	auth := "Bearer " + keyWeb
	for range 2 {
		if code, body := call(t, "POST", h.url("/v1/videos"), auth, videoBody, nil); code != 200 {
			t.Fatalf("submit = %d %s", code, body)
		}
	}
	start := time.Now()
	if code, body := call(t, "POST", h.url("/v1/videos"), auth, videoBody, nil); code != 200 {
		t.Fatalf("third submit = %d %s", code, body)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the third submit went through after %v, before any job's max age", d)
	}
	recs := h.usage(t, 5)
	expired := 0
	for _, r := range recs {
		if r.Job != nil && r.Job.State == "expired" {
			expired++
		}
	}
	if expired != 2 {
		t.Errorf("%d jobs recorded as expired, want 2", expired)
	}
	if _, body := h.adminGet("/admin/usage"); strings.Count(body, `"job":{"state":"expired"`) != 2 {
		t.Errorf("GET /admin/usage does not show the two expired jobs: %s", body)
	}
}

// TestJobsOutliveTheirGateway: jobs submitted through one gateway are
// followed through the next one, after the first has stopped: a restart on
// the same database (memory state), or another replica on the same Redis.
// The first's poller gone, the second's ends the jobs and frees their slots.
func TestJobsOutliveTheirGateway(t *testing.T) {
	eachBackend(t, func(t *testing.T, state string) {
		h := newJobsHarness(t, jobsTemplate, state)
		auth := "Bearer " + keyWeb
		v := h.submitVideo(t)
		var f falStatus
		if code, body := call(t, "POST", h.url("/fal/veo"), "Key "+keyWeb, `{"prompt":"x"}`, &f); code != 200 {
			t.Fatalf("fal submit = %d %s", code, body)
		}
		first := h.gw.Addr()
		h.restart(t)
		var got video
		if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got); code != 200 || got.ID != v.ID {
			t.Fatalf("poll through the second gateway = %d %s", code, body)
		}
		var st falStatus
		if code, body := call(t, "GET", strings.Replace(f.StatusURL, first, h.gw.Addr(), 1), "Key "+keyWeb, "", &st); code != 200 || st.RequestID != f.RequestID {
			t.Fatalf("fal status through the second gateway = %d %s", code, body)
		}
		eventually(t, 5*time.Second, "the second gateway's poller ends both jobs", func() bool { return h.claimsHeld(t) == 0 })
	})
}

// TestJobSubmitRateLimitedCoolsTheAccount: the provider runs one job per
// account though the catalog says two. The second submit's 429 cools the
// whole account: no sibling credential is tried during the cooldown, and
// the submit goes through once a slot is free.
func TestJobSubmitRateLimitedCoolsTheAccount(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	h.simA.Close()
	o := simJobs("org-v", "v1", "v2", "v3")
	o.Accounts["org-v"] = simulator.AccountLimits{MaxInflight: 1}
	h.simA = simulator.New(o)
	h.srvA.Config.Handler = h.simA
	auth := "Bearer " + keyWeb
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, body := call(t, "POST", h.url("/v1/videos"), auth, videoBody, nil); code != 200 {
				t.Errorf("submit = %d %s", code, body)
			}
		})
	}
	wg.Wait()
	subs := submits(h.simA)
	var refused time.Time
	for _, r := range subs {
		switch {
		case r.Status == http.StatusTooManyRequests && refused.IsZero():
			refused = r.At
		case r.Status == http.StatusTooManyRequests:
			t.Errorf("a second 429 (with %s): the account was not cooled", r.Key)
		case !refused.IsZero() && r.At.Sub(refused) < 400*time.Millisecond:
			t.Errorf("a submit with %s %v after the 429, within the account's cooldown", r.Key, r.At.Sub(refused))
		}
	}
	if refused.IsZero() {
		t.Fatalf("the provider never refused a submit: %d submits", len(subs))
	}
}

// TestJobBadInput: malformed submits and unknown job paths get a clear error
// in the caller's protocol (fal's {"detail"} envelope under /fal/), reach no
// upstream, and nothing secret is logged.
func TestJobBadInput(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	for _, tc := range []struct {
		method, path, auth, body string
		status                   int
		want                     string
	}{
		{"POST", "/v1/videos", "Bearer " + keyWeb, `{"model":`, 400, `"code":"invalid_request"`},
		{"POST", "/v1/videos", "Bearer " + keyWeb, `{"prompt":"no model"}`, 400, `"type":"invalid_request_error"`},
		{"POST", "/v1/videos", "", videoBody, 401, `"code":"no_credentials"`},
		{"POST", "/v1/videos", "Bearer " + keyWeb, `{"model":"nope","prompt":"x"}`, 404, `"code":"model_not_found"`},
		{"POST", "/fal/veo", "Key " + keyWeb, `[1,2]`, 400, `"detail":"request body must be a JSON object`},
		{"POST", "/fal/veo", "", `{"prompt":"x"}`, 401, `"detail":`},
		{"GET", "/fal/requests/abc/bogus", "Key " + keyWeb, "", 404, `"code":"not_found"`},
		{"PATCH", "/v1/videos/video_x", "Bearer " + keyWeb, "", 405, `"code":"method_not_allowed"`},
	} {
		if code, body := call(t, tc.method, h.url(tc.path), tc.auth, tc.body, nil); code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %q = %d %s, want %d with %s", tc.method, tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
	for _, body := range []string{"garbage", "--x\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nhi\r\n--x--\r\n"} {
		req, _ := http.NewRequest(http.MethodPost, h.url("/v1/videos"), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyWeb)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request") {
			t.Errorf("multipart submit %q = %d %s, want 400 invalid_request", body, resp.StatusCode, b)
		}
	}
	if n := len(h.simA.Requests()) + len(h.simB.Requests()); n != 0 {
		t.Errorf("the upstreams saw %d requests, want none", n)
	}
	// The upstream's refusal of a submit is passed on as it is.
	if code, body := call(t, "POST", h.url("/v1/videos"), "Bearer "+keyWeb, `{"model":"sora","prompt":"x","seconds":"5"}`, nil); code != 400 ||
		!strings.Contains(body, `"param":"seconds"`) {
		t.Errorf("submit the upstream refuses = %d %s, want its 400 about seconds", code, body)
	}
	// A whole job's life, then no secret anywhere in the logs.
	h.submitVideo(t)
	eventually(t, 5*time.Second, "the job ends", func() bool { return h.claimsHeld(t) == 0 })
	for _, secret := range []string{keyWeb, upstreamKey("v1"), upstreamKey("v2"), upstreamKey("v3")} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("the logs hold the secret %s", secret)
		}
	}
}

// TestJobPollOfAHungUpstream: a poll the upstream does not answer in time is
// a 504 upstream_timeout; the job stays bound, and is followed to its end
// once the upstream answers again.
func TestJobPollOfAHungUpstream(t *testing.T) {
	tpl := strings.Replace(jobsTemplate, "first_byte: 5s", "first_byte: 200ms", 1)
	h := newJobsHarness(t, tpl, "{backend: memory}")
	auth := "Bearer " + keyWeb
	v := h.submitVideo(t)
	creator := submits(h.simA)[0].Key
	h.simA.SetKey(creator, simulator.Behavior{Account: "org-v", JobDuration: jobDuration, Latency: time.Second})
	time.Sleep(150 * time.Millisecond) // past the poll interval: the submit's answer is no longer served again
	if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", nil); code != 504 || !strings.Contains(body, "upstream_timeout") {
		t.Errorf("poll of a hung upstream = %d %s, want 504 upstream_timeout", code, body)
	}
	if h.claimsHeld(t) != 1 {
		t.Error("the job lost its slot while its upstream hung")
	}
	h.simA.SetKey(creator, simulator.Behavior{Account: "org-v", JobDuration: jobDuration})
	eventually(t, 5*time.Second, "the job is followed to its end", func() bool { return h.claimsHeld(t) == 0 })
	var got video
	if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got); code != 200 || got.Status != "completed" {
		t.Errorf("poll after the end = %d %s", code, body)
	}
}

// TestWaitingSubmitTakesACredentialAddedMeanwhile: a submit waiting for a
// slot (no job yet) goes to a credential added to the catalog while it
// waits, before any running job ends.
func TestWaitingSubmitTakesACredentialAddedMeanwhile(t *testing.T) {
	tpl := strings.Replace(jobsTemplate, "  - {id: v2, account: org-v, secret_env: V2, endpoints: [ep-v]}\n  - {id: v3, account: org-v, secret_env: V3, endpoints: [ep-v]}\n", "", 1)
	tpl = strings.Replace(tpl, "{id: org-v, max_inflight: 2,", "{id: org-v, max_inflight: 1,", 1)
	h := newJobsHarness(t, tpl, "{backend: memory}")
	h.simA.SetKey(upstreamKey("v1"), simulator.Behavior{Account: "org-v", JobDuration: time.Hour})
	h.simA.SetKey(upstreamKey("v9"), simulator.Behavior{Account: "org-w", JobDuration: time.Hour})
	auth := "Bearer " + keyWeb
	if code, body := call(t, "POST", h.url("/v1/videos"), auth, videoBody, nil); code != 200 {
		t.Fatalf("first submit = %d %s", code, body)
	}
	done := make(chan int, 1)
	go func() {
		code, _ := call(t, "POST", h.url("/v1/videos"), auth, videoBody, nil)
		done <- code
	}()
	time.Sleep(300 * time.Millisecond) // it waits: org-v's one slot is the first job's
	select {
	case code := <-done:
		t.Fatalf("second submit = %d before any capacity was added", code)
	default:
	}
	h.writeCatalog(strings.Replace(h.catalog(), "  - {id: f1,", "  - {id: v9, secret_env: V9, endpoints: [ep-v]}\n  - {id: f1,", 1))
	select {
	case code := <-done:
		if code != 200 {
			t.Fatalf("second submit = %d, want 200 on the new credential", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting submit did not take the credential added meanwhile")
	}
	if subs := submits(h.simA); len(subs) != 2 || subs[1].Key != upstreamKey("v9") {
		t.Errorf("submits = %d, the second with %q; want it on v9", len(subs), subs[len(subs)-1].Key)
	}
}

// TestJobsOfADeadGatewayFreeTheirSlotsAtMaxAge: a gateway that holds both
// of an account's slots for jobs that never end stops; through the next
// gateway on the same Redis a submit waits until the jobs' maximum age,
// then goes through, and the jobs are recorded as expired.
func TestJobsOfADeadGatewayFreeTheirSlotsAtMaxAge(t *testing.T) {
	url := testenv.Redis(t)
	state := redisState(url, testenv.RedisPrefix(t, url))
	tpl := strings.Replace(jobsTemplate, "max_age: 1m", "max_age: 1s", 1)
	h := newJobsHarness(t, tpl, state)
	h.simA.Close()
	h.simA = simulator.New(simulator.Options{Keys: map[string]simulator.Behavior{
		upstreamKey("v1"): {JobDuration: time.Hour}, upstreamKey("v2"): {JobDuration: time.Hour}, upstreamKey("v3"): {JobDuration: time.Hour},
	}})
	h.srvA.Config.Handler = h.simA
	h.submitVideo(t)
	h.submitVideo(t)
	submitted := time.Now()
	h.restart(t)
	h.submitVideo(t)
	if d := time.Since(submitted); d < 900*time.Millisecond {
		t.Errorf("a third job went through %v after the first two, before their maximum age (1s)", d)
	}
	// The first two jobs are recorded as expired. The third may be too, on
	// a machine slow enough that it reaches its own maximum age before the
	// records are read: it is not counted.
	expired := 0
	for _, r := range h.usage(t, 5) { // three submits, two jobs
		if r.Job != nil && r.Job.State == "expired" && r.Job.Submitted.Before(submitted) {
			expired++
		}
	}
	if expired != 2 {
		t.Errorf("%d of the first two jobs recorded as expired, want 2", expired)
	}
}

// TestGatewayOnPostgres runs a chat request and a video job through a
// gateway whose database is PostgreSQL: usage records (the job's included)
// land there, and a restarted gateway follows the job from its binding there.
func TestGatewayOnPostgres(t *testing.T) {
	pg := testenv.Postgres(t)
	// The usage spool goes to the test's own directory, not data/spool in the package.
	tpl := strings.Replace(jobsTemplate, `database: {url: "sqlite://%s"}`, `database: {url: "`+pg+`", spool_dir: "`+t.TempDir()+`"}%.0s`, 1)
	tpl = strings.Replace(tpl, "models:\n", "models:\n  - alias: chat\n    protocol: openai.chat\n    deployments: [{model: gpt-4o-mini, endpoints: [ep-c]}]\n", 1)
	tpl = strings.Replace(tpl, "accounts:\n", "  - {id: ep-c, base_url: %[4]s, protocols: [openai.chat]}\naccounts:\n", 1) // simB's URL again
	tpl = strings.Replace(tpl, "credentials:\n", "credentials:\n  - {id: c1, secret_env: V3, endpoints: [ep-c]}\n", 1)
	h := newJobsHarness(t, tpl, "{backend: memory}")
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, strings.Replace(chatBody, "fast", "chat", 1)); code != 200 {
		t.Fatalf("chat = %d %s", code, body)
	}
	v := h.submitVideo(t)
	h.restart(t)
	var got video
	for got.Status != "completed" {
		if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), "Bearer "+keyWeb, "", &got); code != 200 {
			t.Fatalf("poll after the restart = %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	db, err := sqldb.Open(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var recs []usageRecord
	eventually(t, 5*time.Second, "three usage records in PostgreSQL", func() bool {
		recs, err = sqlledger.New(db).ListUsage(t.Context(), ledger.UsageFilter{})
		return err == nil && len(recs) == 3
	})
	var chat, job bool
	for _, r := range recs {
		chat = chat || r.Protocol == "openai.chat" && r.Usage.Measured
		job = job || r.RequestID == v.ID && r.Job != nil && r.Job.State == "completed"
	}
	if !chat || !job {
		t.Errorf("usage records = %+v; want the chat request with its tokens and the completed job", recs)
	}
}

// cuttable is a TCP proxy that can drop every connection and refuse new
// ones (cut), then serve again (restore): Redis going away and coming back.
type cuttable struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  []net.Conn
}

func newCuttable(t *testing.T, target string) *cuttable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cuttable{ln: ln, target: target, up: true}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			up := c.up
			c.mu.Unlock()
			out, err := net.Dial("tcp", target)
			if !up || err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up = false
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cuttable) addr() string { return c.ln.Addr().String() }

func (c *cuttable) restore() {
	c.mu.Lock()
	c.up = true
	c.mu.Unlock()
}

// TestJobsWhenRedisGoesAway: with the shared state gone, a poll and a
// submit are each a 503 state_unavailable with a Retry-After, in time; once
// Redis is back the job is followed again.
func TestJobsWhenRedisGoesAway(t *testing.T) {
	proxy, state := redisThroughProxy(t, newCuttable)
	h := newJobsHarness(t, jobsTemplate, state)
	v := h.submitVideo(t)
	proxy.cut()
	auth := "Bearer " + keyWeb
	start := time.Now()
	for _, c := range []struct{ what, method, path, body string }{
		{"poll", "GET", "/v1/videos/" + v.ID, ""},
		{"submit", "POST", "/v1/videos", videoBody},
	} {
		if code, retry, body := callRetryAfter(t, c.method, h.url(c.path), auth, c.body); code != 503 || retry == "" || !strings.Contains(body, "state_unavailable") {
			t.Errorf("%s without Redis = %d (Retry-After %q) %s, want 503 state_unavailable with a Retry-After", c.what, code, retry, body)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the two refusals took %v", d)
	}
	proxy.restore()
	eventually(t, 10*time.Second, "the job is followed again", func() bool {
		code, _ := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", nil)
		return code == 200
	})
}

// upstreamPolls counts the status polls simA received.
func upstreamPolls(sim *simulator.Simulator) int {
	n := 0
	for _, r := range sim.Requests() {
		if strings.HasPrefix(r.Path, "/v1/videos/") && !strings.HasSuffix(r.Path, "/content") {
			n++
		}
	}
	return n
}

// TestJobPollsServedFromTheRecord: a caller polling sooner than the poll
// interval gets the last answer again instead of another upstream call, and
// once the job has ended, every poll is answered from its record.
func TestJobPollsServedFromTheRecord(t *testing.T) {
	tpl := strings.Replace(jobsTemplate, "poll_interval: 100ms, max_poll_interval: 300ms", "poll_interval: 2s, max_poll_interval: 2s", 1)
	h := newJobsHarness(t, tpl, "{backend: memory}")
	v := h.submitVideo(t)
	auth := "Bearer " + keyWeb
	for range 5 {
		var got video
		if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got); code != 200 || got.ID != v.ID || got.Status != "queued" {
			t.Fatalf("poll = %d %s", code, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.url("/v1/videos/"+v.ID), nil)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Openai-Poll-After-Ms"); got != "2000" {
		t.Errorf("a poll answered from the record has poll-after %q; want the SDKs told to wait the poll interval (2000)", got)
	}
	if n := upstreamPolls(h.simA); n != 0 {
		t.Errorf("five polls right after the submit made %d upstream calls, want 0", n)
	}
	var got video
	eventually(t, 5*time.Second, "the job is seen completed", func() bool {
		call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got)
		return got.Status == "completed"
	})
	eventually(t, time.Second, "the job ends", func() bool { return h.claimsHeld(t) == 0 })
	before := upstreamPolls(h.simA)
	for range 3 {
		if code, body := call(t, "GET", h.url("/v1/videos/"+v.ID), auth, "", &got); code != 200 || got.Status != "completed" || got.ID != v.ID {
			t.Fatalf("poll after the end = %d %s", code, body)
		}
	}
	if n := upstreamPolls(h.simA) - before; n != 0 {
		t.Errorf("polls of an ended job made %d upstream calls, want 0", n)
	}
}

// TestOperatorSeesAJobsBinding: `sluice jobs show` (the admin API) tells an
// operator which credential runs a caller's job, and its upstream ID.
func TestOperatorSeesAJobsBinding(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	v := h.submitVideo(t)
	env := func(k string) string {
		return map[string]string{"SLUICE_ADMIN_URL": "http://" + h.gw.AdminAddr(), "SLUICE_ADMIN_TOKEN": testEnv["ADMIN_TOKEN"]}[k]
	}
	var out, errs strings.Builder
	if code := adminclient.RunCLI(t.Context(), []string{"jobs", "show", v.ID, "--json"}, &out, &errs, env); code != 0 {
		t.Fatalf("sluice jobs show = %d: %s", code, errs.String())
	}
	var j admin.JobState
	if err := json.Unmarshal([]byte(out.String()), &j); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	sub := submits(h.simA)[0]
	if j.ID != v.ID || j.KeyID != "web" || upstreamKey(j.CredentialID) != sub.Key || j.AccountID != "org-v" ||
		!strings.HasPrefix(j.UpstreamID, "video_") || j.UpstreamID == v.ID || j.NextPoll == nil {
		t.Errorf("job = %+v; want it bound to the credential of %s", j, sub.Key)
	}
	out.Reset()
	if code := adminclient.RunCLI(t.Context(), []string{"jobs", "show", v.ID}, &out, &errs, env); code != 0 || !strings.Contains(out.String(), j.CredentialID) {
		t.Errorf("sluice jobs show (table) = %d %s", code, out.String())
	}
	if code, body := h.adminGet("/admin/jobs/video_nope"); code != 404 {
		t.Errorf("GET /admin/jobs/video_nope = %d %s, want 404", code, body)
	}
}

// TestSubmitOfACallerWhoLeavesIsStillBound: a caller that leaves while its
// submit is upstream does not leave an unseen job there: Sluice binds the
// job the upstream created, holds its slot until it ends, and records it.
func TestSubmitOfACallerWhoLeavesIsStillBound(t *testing.T) {
	h := newJobsHarness(t, jobsTemplate, "{backend: memory}")
	for _, id := range []string{"v1", "v2", "v3"} {
		h.simA.SetKey(upstreamKey(id), simulator.Behavior{Account: "org-v", JobDuration: jobDuration, Latency: 300 * time.Millisecond})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/v1/videos"), strings.NewReader(videoBody))
	req.Header.Set("Authorization", "Bearer "+keyWeb)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the submit answered %d before the caller left", resp.StatusCode)
	}
	eventually(t, 2*time.Second, "the job is bound and holds its slot", func() bool { return h.claimsHeld(t) == 1 })
	eventually(t, 5*time.Second, "the job ends and frees its slot", func() bool { return h.claimsHeld(t) == 0 })
	jobs := 0
	for _, r := range h.usage(t, 2) {
		if r.Job != nil && r.Job.State == "completed" {
			jobs++
		}
	}
	if jobs != 1 {
		t.Errorf("%d completed job records, want 1", jobs)
	}
}
