package pipeline

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/store"
)

func TestParseStatus(t *testing.T) {
	fal, videos := sluice.ProtocolFalQueue, sluice.ProtocolOpenAIVideos
	tests := []struct {
		name  string
		p     sluice.Protocol
		body  string
		state sluice.JobState
		secs  float64
	}{
		{"fal queued", fal, `{"status":"IN_QUEUE","queue_position":3}`, sluice.JobQueued, 0},
		{"fal running", fal, `{"status":"IN_PROGRESS","logs":[]}`, sluice.JobInProgress, 0},
		{"fal completed", fal, `{"status":"COMPLETED","metrics":{"inference_time":7.5}}`, sluice.JobCompleted, 7.5},
		{"fal completed with null error", fal, `{"status":"COMPLETED","error":null}`, sluice.JobCompleted, 0},
		{"fal completed but failed", fal, `{"status":"COMPLETED","error":"boom","error_type":"runner_error"}`, sluice.JobFailed, 0},
		{"fal cancelled", fal, `{"status":"COMPLETED","error":"Request was cancelled","error_type":"request_cancelled"}`, sluice.JobCancelled, 0},
		{"fal third-party CANCELED", fal, `{"status":"CANCELED"}`, sluice.JobCancelled, 0},
		{"fal unknown status ends the job", fal, `{"status":"SOMETHING_NEW"}`, sluice.JobFailed, 0},
		{"video queued", videos, `{"id":"video_1","status":"queued","progress":0}`, sluice.JobQueued, 0},
		{"video running", videos, `{"status":"in_progress","progress":40}`, sluice.JobInProgress, 0},
		{"video completed", videos, `{"status":"completed","seconds":"8"}`, sluice.JobCompleted, 8},
		{"video completed, numeric seconds", videos, `{"status":"completed","seconds":12}`, sluice.JobCompleted, 12},
		{"video failed", videos, `{"status":"failed","error":{"code":"x","message":"y"}}`, sluice.JobFailed, 0},
		{"video unknown status ends the job", videos, `{"status":"archived"}`, sluice.JobFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := parseStatus(tt.p, []byte(tt.body))
			if err != nil || st.state != tt.state || st.seconds != tt.secs {
				t.Errorf("parseStatus(%s) = %+v, %v; want %s, %v seconds", tt.body, st, err, tt.state, tt.secs)
			}
			if want := tt.state != sluice.JobQueued && tt.state != sluice.JobInProgress; st.ended() != want {
				t.Errorf("ended() = %v, want %v", st.ended(), want)
			}
		})
	}
	if _, err := parseStatus(videos, []byte(`<html>`)); err == nil {
		t.Error("parseStatus of HTML succeeded")
	}
}

func TestParseSubmit(t *testing.T) {
	fal := &sluice.Edge{Protocol: sluice.ProtocolFalQueue, Endpoint: &sluice.Endpoint{BaseURL: "https://queue.fal.run"}}
	videos := &sluice.Edge{Protocol: sluice.ProtocolOpenAIVideos, Endpoint: &sluice.Endpoint{BaseURL: "https://api.openai.com"}}
	s, err := parseSubmit(fal, []byte(`{"request_id":"r1","status":"IN_QUEUE",
		"status_url":"https://queue.fal.run/fal-ai/veo3/requests/r1/status",
		"response_url":"https://elsewhere.example/fal-ai/veo3/requests/r1",
		"cancel_url":"http://queue.fal.run/fal-ai/veo3/requests/r1/cancel"}`))
	if err != nil || s.id != "r1" || s.state != sluice.JobQueued {
		t.Fatalf("parseSubmit(fal) = %+v, %v", s, err)
	}
	if s.statusURL == "" || s.resultURL != "" || s.cancelURL != "" {
		t.Errorf("follow-up URLs = %q %q %q; want only the one on the endpoint's own origin", s.statusURL, s.resultURL, s.cancelURL)
	}
	if s, err := parseSubmit(videos, []byte(`{"id":"video_9","status":"in_progress"}`)); err != nil || s.id != "video_9" || s.state != sluice.JobInProgress {
		t.Errorf("parseSubmit(videos) = %+v, %v", s, err)
	}
	if _, err := parseSubmit(videos, []byte(`{"status":"queued"}`)); err == nil {
		t.Error("parseSubmit of an answer without an ID succeeded")
	}
}

func TestFollowCallBuildsFalURLsFromTheAppRoot(t *testing.T) {
	e := &sluice.Edge{Protocol: sluice.ProtocolFalQueue, Endpoint: &sluice.Endpoint{BaseURL: "https://queue.fal.run/"}}
	job := &store.Job{Model: "fal-ai/flux/dev", UpstreamID: "r1"}
	for op, want := range map[JobOp]string{
		JobStatus: "GET https://queue.fal.run/fal-ai/flux/requests/r1/status?logs=1",
		JobResult: "GET https://queue.fal.run/fal-ai/flux/requests/r1",
		JobCancel: "PUT https://queue.fal.run/fal-ai/flux/requests/r1/cancel",
	} {
		if c := followCall(e, job, op, "logs=1"); c.Method+" "+c.URL != want {
			t.Errorf("followCall(%d) = %s %s, want %s", op, c.Method, c.URL, want)
		}
	}
	job.StatusURL = "https://queue.fal.run/fal-ai/flux/requests/r1/status"
	if c := followCall(e, job, JobStatus, ""); c.URL != job.StatusURL {
		t.Errorf("followCall with a stored status URL = %s, want it as is", c.URL)
	}
	v := &sluice.Edge{Protocol: sluice.ProtocolOpenAIVideos, Endpoint: &sluice.Endpoint{BaseURL: "https://api.openai.com/v1"}}
	if c := followCall(v, &store.Job{UpstreamID: "video_1"}, JobResult, "variant=thumbnail"); c.URL != "https://api.openai.com/v1/videos/video_1/content?variant=thumbnail" {
		t.Errorf("video content URL = %s", c.URL)
	}
}
