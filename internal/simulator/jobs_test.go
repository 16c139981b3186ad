package simulator_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/simulator"
)

const (
	jobDur    = 150 * time.Millisecond
	videoBody = `{"model":"sora-2","prompt":"a red kite over dunes at dusk","seconds":"8","size":"1280x720"}`
)

type video struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Model     string `json:"model"`
	Status    string `json:"status"`
	Progress  int    `json:"progress"`
	CreatedAt int64  `json:"created_at"`
	Seconds   string `json:"seconds"`
	Size      string `json:"size"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sendAuth makes a request with a full Authorization header value.
func sendAuth(t *testing.T, srv *httptest.Server, auth, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	if strings.HasPrefix(url, "/") {
		url = srv.URL + url
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp, readAll(t, resp)
}

func decodeVideo(t *testing.T, resp *http.Response, body []byte) video {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200 (body %s)", resp.StatusCode, body)
	}
	var v video
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("video %s: %v", body, err)
	}
	return v
}

func submitVideo(t *testing.T, srv *httptest.Server, key string) video {
	t.Helper()
	resp, body := sendAuth(t, srv, "Bearer "+key, http.MethodPost, "/v1/videos", videoBody)
	return decodeVideo(t, resp, body)
}

func pollVideo(t *testing.T, srv *httptest.Server, key, id string) video {
	t.Helper()
	resp, body := sendAuth(t, srv, "Bearer "+key, http.MethodGet, "/v1/videos/"+id, "")
	return decodeVideo(t, resp, body)
}

// waitVideo polls until the video is terminal and returns it with the
// statuses seen.
func waitVideo(t *testing.T, srv *httptest.Server, key, id string) (video, []string) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := pollVideo(t, srv, key, id)
		if len(seen) == 0 || seen[len(seen)-1] != v.Status {
			seen = append(seen, v.Status)
		}
		if v.Status == "completed" || v.Status == "failed" {
			return v, seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("video %s still %s", id, v.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestVideoLifecycle(t *testing.T) {
	sim, srv := start(t, simulator.Options{Default: simulator.Behavior{JobDuration: jobDur}})
	v := submitVideo(t, srv, "k1")
	if !strings.HasPrefix(v.ID, "video_") || v.Object != "video" || v.Model != "sora-2" || v.Status != "queued" ||
		v.Progress != 0 || v.Seconds != "8" || v.Size != "1280x720" || v.Error != nil || v.CreatedAt == 0 {
		t.Errorf("created video = %+v", v)
	}
	if got := sim.Jobs("k1"); got != 1 {
		t.Errorf("Jobs(k1) = %d, want 1", got)
	}
	if got := sim.InFlight(); got != 1 {
		t.Errorf("InFlight() = %d, want 1: the job holds a slot", got)
	}

	// Content before completion is refused.
	resp, body := sendAuth(t, srv, "Bearer k1", http.MethodGet, "/v1/videos/"+v.ID+"/content", "")
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("early content status = %d, want 409 (body %s)", resp.StatusCode, body)
	}

	// Another key cannot see it.
	for _, m := range []string{"GET /v1/videos/" + v.ID, "GET /v1/videos/" + v.ID + "/content", "DELETE /v1/videos/" + v.ID} {
		method, path, _ := strings.Cut(m, " ")
		resp, body := sendAuth(t, srv, "Bearer k2", method, path, "")
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s with another key = %d, want 404 (body %s)", m, resp.StatusCode, body)
		}
	}

	done, seen := waitVideo(t, srv, "k1", v.ID)
	if done.Status != "completed" || done.Progress != 100 || done.Error != nil {
		t.Errorf("final video = %+v", done)
	}
	if seen[len(seen)-1] != "completed" || (seen[0] != "queued" && seen[0] != "in_progress") {
		t.Errorf("statuses seen = %v", seen)
	}
	if got := sim.Jobs("k1"); got != 0 {
		t.Errorf("Jobs(k1) = %d after completion, want 0", got)
	}
	eventually(t, "job slot released", func() bool { return sim.InFlight() == 0 })

	resp, body = sendAuth(t, srv, "Bearer k1", http.MethodGet, "/v1/videos/"+v.ID+"/content", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "video/mp4" || !bytes.Contains(body[:12], []byte("ftyp")) {
		t.Errorf("content = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	_, again := sendAuth(t, srv, "Bearer k1", http.MethodGet, "/v1/videos/"+v.ID+"/content", "")
	if !bytes.Equal(body, again) {
		t.Error("content is not deterministic")
	}

	// The journal tells which key polled.
	polls := map[string]int{}
	for _, r := range sim.Requests() {
		if strings.HasPrefix(r.Path, "/v1/videos/"+v.ID) {
			polls[r.Key]++
		}
	}
	if polls["k1"] < 3 || polls["k2"] != 3 {
		t.Errorf("polls by key = %v", polls)
	}

	resp, body = sendAuth(t, srv, "Bearer k1", http.MethodDelete, "/v1/videos/"+v.ID, "")
	if resp.StatusCode != 200 || string(body) != `{"deleted":true,"id":"`+v.ID+`","object":"video.deleted"}` {
		t.Errorf("delete = %d %s", resp.StatusCode, body)
	}
	if resp, _ := sendAuth(t, srv, "Bearer k1", http.MethodGet, "/v1/videos/"+v.ID, ""); resp.StatusCode != 404 {
		t.Errorf("GET after delete = %d, want 404", resp.StatusCode)
	}
}

func TestVideoFailure(t *testing.T) {
	sim, srv := start(t, simulator.Options{Keys: map[string]simulator.Behavior{
		"bad": {JobDuration: jobDur, JobFail: true, MaxInflight: 1},
	}})
	v := submitVideo(t, srv, "bad")
	done, _ := waitVideo(t, srv, "bad", v.ID)
	if done.Status != "failed" || done.Error == nil || done.Error.Code == "" || done.Error.Message == "" {
		t.Errorf("failed video = %+v", done)
	}
	if resp, body := sendAuth(t, srv, "Bearer bad", http.MethodGet, "/v1/videos/"+v.ID+"/content", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("content of failed video = %d %s, want 409", resp.StatusCode, body)
	}
	// A failed job is terminal: its slot is free again.
	submitVideo(t, srv, "bad")
	if got := sim.Jobs("bad"); got != 1 {
		t.Errorf("Jobs = %d, want 1", got)
	}
}

func TestVideoValidation(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	for _, body := range []string{
		`{"prompt":"x"}`,
		`{"model":"sora-2"}`,
		`{"model":"sora-2","prompt":"x","seconds":"5"}`,
		`{"model":"sora-2","prompt":"x","seconds":8}`,
		`{"model":"sora-2","prompt":"x","size":"1x1"}`,
	} {
		resp, got := sendAuth(t, srv, "Bearer k", http.MethodPost, "/v1/videos", body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400 (%s)", body, resp.StatusCode, got)
		}
	}
	if resp, _ := sendAuth(t, srv, "", http.MethodGet, "/v1/videos/video_x", ""); resp.StatusCode != 401 {
		t.Errorf("poll without key = %d, want 401", resp.StatusCode)
	}
}

func TestJobHoldsSlot(t *testing.T) {
	sim, srv := start(t, simulator.Options{
		Keys: map[string]simulator.Behavior{
			"one":  {JobDuration: jobDur, MaxInflight: 1},
			"acct": {JobDuration: time.Minute, Account: "a"},
			"acc2": {JobDuration: time.Minute, Account: "a"},
		},
		Accounts: map[string]simulator.AccountLimits{"a": {MaxInflight: 1}},
	})
	v := submitVideo(t, srv, "one")
	resp, body := sendAuth(t, srv, "Bearer one", http.MethodPost, "/v1/videos", videoBody)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "rate_limit_exceeded") {
		t.Fatalf("second submit = %d %s, want 429", resp.StatusCode, body)
	}
	// fal submits share the cap.
	if resp, _ := sendAuth(t, srv, "Key one", http.MethodPost, "/fal-ai/flux/dev", `{"prompt":"x"}`); resp.StatusCode != 429 {
		t.Errorf("fal submit over the cap = %d, want 429", resp.StatusCode)
	}
	// Polls are never rejected by the cap.
	waitVideo(t, srv, "one", v.ID)
	submitVideo(t, srv, "one")

	// Account caps: a running job of one key blocks the other key; deleting
	// it frees the slot.
	a := submitVideo(t, srv, "acct")
	if resp, _ := sendAuth(t, srv, "Bearer acc2", http.MethodPost, "/v1/videos", videoBody); resp.StatusCode != 429 {
		t.Errorf("account over the cap = %d, want 429", resp.StatusCode)
	}
	if resp, body := sendAuth(t, srv, "Bearer acct", http.MethodDelete, "/v1/videos/"+a.ID, ""); resp.StatusCode != 200 {
		t.Fatalf("delete = %d %s", resp.StatusCode, body)
	}
	submitVideo(t, srv, "acc2")
	if got := sim.Jobs("acct"); got != 0 {
		t.Errorf("Jobs(acct) after delete = %d, want 0", got)
	}
	if got := sim.MaxInFlight("a"); got != 1 {
		t.Errorf("MaxInFlight(a) = %d, want 1", got)
	}
}

type falStatus struct {
	Status        string `json:"status"`
	RequestID     string `json:"request_id"`
	StatusURL     string `json:"status_url"`
	ResponseURL   string `json:"response_url"`
	CancelURL     string `json:"cancel_url"`
	QueuePosition *int   `json:"queue_position"`
	Error         string `json:"error"`
	ErrorType     string `json:"error_type"`
}

func falSubmit(t *testing.T, srv *httptest.Server, key string) falStatus {
	t.Helper()
	resp, body := sendAuth(t, srv, "Key "+key, http.MethodPost, "/fal-ai/flux/dev?fal_webhook=", `{"prompt":"a kite"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("fal submit = %d %s", resp.StatusCode, body)
	}
	var s falStatus
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func falPoll(t *testing.T, srv *httptest.Server, key, url string) falStatus {
	t.Helper()
	resp, body := sendAuth(t, srv, "Key "+key, http.MethodGet, url+"?logs=1", "")
	if resp.StatusCode != 200 {
		t.Fatalf("fal status = %d %s", resp.StatusCode, body)
	}
	var s falStatus
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFalQueue(t *testing.T) {
	sim, srv := start(t, simulator.Options{Default: simulator.Behavior{JobDuration: jobDur, MaxInflight: 2}})
	s := falSubmit(t, srv, "fk")
	base := srv.URL + "/fal-ai/flux/requests/" + s.RequestID
	if s.RequestID == "" || s.StatusURL != base+"/status" || s.ResponseURL != base || s.CancelURL != base+"/cancel" {
		t.Fatalf("submit = %+v; want URLs under the {owner}/{app} root", s)
	}
	if got := sim.Jobs("fk"); got != 1 {
		t.Errorf("Jobs(fk) = %d, want 1", got)
	}
	if st := falPoll(t, srv, "fk", s.StatusURL); st.Status != "IN_QUEUE" || st.QueuePosition == nil || st.RequestID != s.RequestID {
		t.Errorf("first status = %+v", st)
	}
	// Bearer auth is not fal's; another key gets 404.
	if resp, _ := sendAuth(t, srv, "Bearer fk", http.MethodGet, s.StatusURL, ""); resp.StatusCode != 401 {
		t.Errorf("bearer auth on fal = %d, want 401", resp.StatusCode)
	}
	for _, u := range []string{s.StatusURL, s.ResponseURL} {
		if resp, _ := sendAuth(t, srv, "Key other", http.MethodGet, u, ""); resp.StatusCode != 404 {
			t.Errorf("GET %s with another key = %d, want 404", u, resp.StatusCode)
		}
	}
	if resp, _ := sendAuth(t, srv, "Key other", http.MethodPut, s.CancelURL, ""); resp.StatusCode != 404 {
		t.Errorf("cancel with another key = %d, want 404", resp.StatusCode)
	}
	if resp, body := sendAuth(t, srv, "Key fk", http.MethodGet, s.ResponseURL, ""); resp.StatusCode < 400 {
		t.Errorf("early result = %d %s, want an error", resp.StatusCode, body)
	}

	eventually(t, "COMPLETED", func() bool { return falPoll(t, srv, "fk", s.StatusURL).Status == "COMPLETED" })
	if st := falPoll(t, srv, "fk", s.StatusURL); st.Error != "" {
		t.Errorf("completed status has error %q", st.Error)
	}
	resp, body := sendAuth(t, srv, "Key fk", http.MethodGet, s.ResponseURL, "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Fal-Request-Id") != s.RequestID || !strings.Contains(string(body), `"video"`) {
		t.Errorf("result = %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, body := sendAuth(t, srv, "Key fk", http.MethodPut, s.CancelURL, ""); resp.StatusCode != 400 || !strings.Contains(string(body), "ALREADY_COMPLETED") {
		t.Errorf("cancel after completion = %d %s", resp.StatusCode, body)
	}
	eventually(t, "slot released", func() bool { return sim.InFlight() == 0 })

	// Cancel a running request: it frees its slot and ends with an error.
	c := falSubmit(t, srv, "fk")
	falSubmit(t, srv, "fk")
	if resp, _ := sendAuth(t, srv, "Key fk", http.MethodPost, "/fal-ai/flux/dev", `{}`); resp.StatusCode != 429 {
		t.Errorf("third submit = %d, want 429", resp.StatusCode)
	}
	resp, body = sendAuth(t, srv, "Key fk", http.MethodPut, c.CancelURL, "")
	if resp.StatusCode != http.StatusAccepted || string(body) != `{"status":"CANCELLATION_REQUESTED"}` {
		t.Errorf("cancel = %d %s", resp.StatusCode, body)
	}
	if st := falPoll(t, srv, "fk", c.StatusURL); st.Status != "COMPLETED" || st.Error == "" {
		t.Errorf("status after cancel = %+v", st)
	}
	if resp, _ := sendAuth(t, srv, "Key fk", http.MethodGet, c.ResponseURL, ""); resp.StatusCode < 400 {
		t.Errorf("result after cancel = %d, want an error", resp.StatusCode)
	}
	falSubmit(t, srv, "fk") // the cancelled one's slot is free

	var falKeys int
	for _, r := range sim.Requests() {
		if strings.HasPrefix(r.Path, "/fal-ai/") && r.Key == "fk" {
			falKeys++
		}
	}
	if falKeys < 10 {
		t.Errorf("journal has %d fal requests with key fk", falKeys)
	}
}

func TestFalFailure(t *testing.T) {
	_, srv := start(t, simulator.Options{Default: simulator.Behavior{JobDuration: jobDur, JobFail: true}})
	s := falSubmit(t, srv, "fk")
	eventually(t, "COMPLETED", func() bool { return falPoll(t, srv, "fk", s.StatusURL).Status == "COMPLETED" })
	if st := falPoll(t, srv, "fk", s.StatusURL); st.Error == "" || st.ErrorType == "" {
		t.Errorf("failed status = %+v, want error and error_type", st)
	}
	resp, body := sendAuth(t, srv, "Key fk", http.MethodGet, s.ResponseURL, "")
	if resp.StatusCode < 400 || resp.Header.Get("X-Fal-Error-Type") == "" || !strings.Contains(string(body), `"detail"`) {
		t.Errorf("failed result = %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := sendAuth(t, srv, "", http.MethodPost, "/fal-ai/flux/dev", `{}`); resp.StatusCode != 401 {
		t.Errorf("fal submit without key = %d, want 401", resp.StatusCode)
	}
	if resp, _ := sendAuth(t, srv, "Key fk", http.MethodPost, "/fal-ai/flux/dev", `[1`); resp.StatusCode != 422 {
		t.Errorf("fal submit with bad JSON = %d, want 422", resp.StatusCode)
	}
}
