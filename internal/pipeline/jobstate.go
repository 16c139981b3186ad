package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/upstream"
)

// What Sluice reads of the job APIs' answers (docs/protocols.md, "Async jobs").

// submitted is what a submit answer says of the new job.
type submitted struct {
	id                              string
	state                           sluice.JobState
	statusURL, resultURL, cancelURL string // fal only, and only on the endpoint's own origin
}

// parseSubmit reads the upstream's answer to a submit on e.
func parseSubmit(e *sluice.Edge, body []byte) (submitted, error) {
	var v struct {
		ID          string `json:"id"`           // OpenAI
		Status      string `json:"status"`       // both
		RequestID   string `json:"request_id"`   // fal
		StatusURL   string `json:"status_url"`   // fal
		ResponseURL string `json:"response_url"` // fal
		CancelURL   string `json:"cancel_url"`   // fal
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return submitted{}, fmt.Errorf("submit answer is not a JSON object: %w", err)
	}
	s := submitted{id: v.ID, state: sluice.JobQueued}
	if e.Protocol == sluice.ProtocolFalQueue {
		s.id = v.RequestID
		own := func(u string) string {
			if upstream.SameOrigin(e, u) {
				return u
			}
			return "" // built from the request ID instead
		}
		s.statusURL, s.resultURL, s.cancelURL = own(v.StatusURL), own(v.ResponseURL), own(v.CancelURL)
	} else if sluice.JobState(v.Status) == sluice.JobInProgress {
		s.state = sluice.JobInProgress
	}
	if s.id == "" {
		return submitted{}, errors.New("submit answer carries no job ID")
	}
	return s, nil
}

// status is what a status answer says of a job.
type status struct {
	state   sluice.JobState
	seconds float64 // the run (fal inference time) or video (OpenAI seconds) length, at the end
}

func (s status) ended() bool { return s.state != sluice.JobQueued && s.state != sluice.JobInProgress }

// parseStatus reads a status answer. An unknown status counts as an end
// (failed): fal documents that new statuses may appear, and a job Sluice
// cannot follow must not hold its slot until the maximum age.
func parseStatus(p sluice.Protocol, body []byte) (status, error) {
	var v struct {
		Status    string          `json:"status"`
		Seconds   json.RawMessage `json:"seconds"`    // OpenAI: "8" (a string, or a number in older answers)
		Error     json.RawMessage `json:"error"`      // fal: a message when a finished run failed
		ErrorType string          `json:"error_type"` // fal
		Metrics   struct {
			InferenceTime float64 `json:"inference_time"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return status{}, fmt.Errorf("status answer is not a JSON object: %w", err)
	}
	if p == sluice.ProtocolFalQueue {
		switch strings.ToUpper(v.Status) {
		case "IN_QUEUE":
			return status{state: sluice.JobQueued}, nil
		case "IN_PROGRESS":
			return status{state: sluice.JobInProgress}, nil
		case "COMPLETED":
			st := status{state: sluice.JobCompleted, seconds: v.Metrics.InferenceTime}
			switch {
			case v.ErrorType == "request_cancelled":
				st.state = sluice.JobCancelled
			case len(v.Error) > 0 && string(v.Error) != "null":
				st.state = sluice.JobFailed
			}
			return st, nil
		case "CANCELED", "CANCELLED":
			return status{state: sluice.JobCancelled}, nil
		}
		return status{state: sluice.JobFailed}, nil
	}
	switch state := sluice.JobState(v.Status); state {
	case sluice.JobQueued, sluice.JobInProgress:
		return status{state: state}, nil
	case sluice.JobCompleted:
		secs, _ := strconv.ParseFloat(strings.Trim(string(v.Seconds), `"`), 64)
		return status{state: sluice.JobCompleted, seconds: secs}, nil
	case sluice.JobCancelled:
		return status{state: sluice.JobCancelled}, nil
	}
	return status{state: sluice.JobFailed}, nil
}
