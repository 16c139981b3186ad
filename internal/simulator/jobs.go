package simulator

import (
	"bytes"
	"encoding/json"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Asynchronous jobs: OpenAI Videos (POST /v1/videos, then polls) and the fal
// queue (POST /{owner}/{app}[/{subpath}], then status, result and cancel
// under /{owner}/{app}/requests/{id}). A job belongs to the key that
// submitted it; any other key gets 404. A job holds a concurrency slot of its
// key and account (Behavior.MaxInflight, AccountLimits.MaxInflight) from
// submit until it reaches a terminal state, as a running job does upstream.
// Follow-up requests (polls, content, delete, cancel) hold no slot and are
// never rejected by a cap.

// defaultJobDuration is the run time of a job when Behavior.JobDuration is 0.
const defaultJobDuration = 2 * time.Second

// job is one submitted job. Its state is a function of time since created,
// except for cancellation.
type job struct {
	id        string
	key       string
	account   string
	fal       bool   // fal queue job; else an OpenAI video
	model     string // video model, or fal endpoint id ("fal-ai/flux/dev")
	root      string // fal "{owner}/{app}": the prefix of its follow-up URLs
	seconds   string
	size      string
	created   time.Time
	dur       time.Duration
	fail      bool
	cancelled bool // fal cancel before completion
	held      bool // still holds a concurrency slot
}

// Job states, named as OpenAI does; fal's names are derived from them.
const (
	jobQueued     = "queued"
	jobInProgress = "in_progress"
	jobCompleted  = "completed"
	jobFailed     = "failed"
	jobCancelled  = "cancelled"
)

// state returns the job's status at now and its progress (0-100).
func (j *job) state(now time.Time) (string, int) {
	if j.cancelled {
		return jobCancelled, 0
	}
	e := now.Sub(j.created)
	switch {
	case e >= j.dur && j.fail:
		return jobFailed, 0
	case e >= j.dur:
		return jobCompleted, 100
	case e < j.dur/4:
		return jobQueued, 0
	}
	return jobInProgress, min(max(int(e*100/j.dur), 1), 99)
}

func terminal(state string) bool {
	return state == jobCompleted || state == jobFailed || state == jobCancelled
}

// jobStore holds every job. Lock order: jobs.mu, then gauges.mu.
type jobStore struct {
	mu      sync.Mutex
	byID    map[string]*job
	holding map[*job]struct{} // jobs with held set
}

func (st *jobStore) init() {
	st.byID = make(map[string]*job)
	st.holding = make(map[*job]struct{})
}

// settleJobs releases the slots of jobs that have reached a terminal state.
// It runs before every submit (so a job observed as terminal never blocks
// one) and from a timer at each job's end (so InFlight drops without polls).
func (s *Simulator) settleJobs() {
	now := time.Now()
	st := &s.jobs
	st.mu.Lock()
	defer st.mu.Unlock()
	for j := range st.holding {
		if state, _ := j.state(now); terminal(state) {
			s.unholdLocked(j)
		}
	}
}

// unholdLocked releases j's slot if it holds one. st.mu must be held.
func (s *Simulator) unholdLocked(j *job) {
	if !j.held {
		return
	}
	j.held = false
	delete(s.jobs.holding, j)
	s.gauges.release(j.key, j.account)
}

// addJob stores j, which takes over the slot its submit request was admitted
// with, and arms the timer that releases it.
func (s *Simulator) addJob(j *job) {
	j.held = true
	s.jobs.mu.Lock()
	s.jobs.byID[j.id] = j
	s.jobs.holding[j] = struct{}{}
	s.jobs.mu.Unlock()
	time.AfterFunc(j.dur, s.settleJobs)
}

// lookupJob returns the job id of kind fal visible to key, or nil.
func (s *Simulator) lookupJob(id, key string, fal bool) *job {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	j := s.jobs.byID[id]
	if j == nil || j.key != key || j.fal != fal {
		return nil
	}
	return j
}

// Jobs returns how many jobs submitted with key are not yet in a terminal
// state (queued or running). Safe for concurrent use.
func (s *Simulator) Jobs(key string) int {
	now := time.Now()
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	n := 0
	for _, j := range s.jobs.byID {
		if state, _ := j.state(now); j.key == key && !terminal(state) {
			n++
		}
	}
	return n
}

func (c *call) newJob(fal bool, model string) *job {
	d := c.b.JobDuration
	if d <= 0 {
		d = defaultJobDuration
	}
	return &job{key: c.rec.Key, account: c.b.Account, fal: fal, model: model,
		created: time.Now(), dur: d, fail: c.b.JobFail}
}

// jobID returns a new id: "video_" and 32 hex digits for OpenAI, a UUID for fal.
func (s *Simulator) jobID(fal bool) string {
	b := make([]byte, 0, 38)
	x := s.nonce ^ s.seq.Add(1)*0x9e3779b97f4a7c15
	r1, r2 := splitmix64(&x), splitmix64(&x)
	const hex = "0123456789abcdef"
	if !fal {
		b = append(b, "video_"...)
		for i := range 32 {
			r := r1
			if i >= 16 {
				r = r2
			}
			b = append(b, hex[(r>>(4*(i%16)))&0xf])
		}
		return string(b)
	}
	for i := range 32 {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b = append(b, '-')
		}
		r := r1
		if i >= 16 {
			r = r2
		}
		b = append(b, hex[(r>>(4*(i%16)))&0xf])
	}
	return string(b)
}

func (c *call) json(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and slices of plain values are encoded
	}
	c.respond(status, "application/json", b)
}

// --- OpenAI Videos ---

type videoRequest struct {
	Model   string  `json:"model"`
	Prompt  *string `json:"prompt"`
	Seconds *string `json:"seconds"`
	Size    *string `json:"size"`
}

var (
	videoSeconds = []string{"4", "8", "12"}
	videoSizes   = []string{"720x1280", "1280x720", "1024x1792", "1792x1024"}
)

func oneOf(param, got string, allowed []string) *apiError {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return invalidRequest("Invalid value: '"+got+"'. Supported values are: '"+strings.Join(allowed, "', '")+"'.", param, "invalid_value")
}

// parseVideo reads a video create request: JSON, or a multipart form as
// the OpenAI SDKs send it (the reference image, a file part, is ignored).
func parseVideo(body []byte, contentType string) parsed {
	var req videoRequest
	if mt, params, err := mime.ParseMediaType(contentType); err == nil && mt == "multipart/form-data" {
		if err := formRequest(&req, body, params["boundary"]); err != nil {
			return parsed{err: invalidRequest("Could not parse multipart form: "+err.Error(), "", "invalid_multipart")}
		}
	} else if err := json.Unmarshal(body, &req); err != nil {
		return parsed{err: decodeError(err)}
	}
	p := parsed{model: req.Model, video: &req}
	switch {
	case req.Model == "":
		p.err = missingModel
	case req.Prompt == nil || *req.Prompt == "":
		p.err = invalidRequest("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")
	case req.Seconds != nil:
		p.err = oneOf("seconds", *req.Seconds, videoSeconds)
	}
	if p.err == nil && req.Size != nil {
		p.err = oneOf("size", *req.Size, videoSizes)
	}
	return p
}

// formRequest fills req from the fields of a multipart form.
func formRequest(req *videoRequest, body []byte, boundary string) error {
	form, err := multipart.NewReader(bytes.NewReader(body), boundary).ReadForm(1 << 20)
	if err != nil {
		return err
	}
	defer form.RemoveAll()
	field := func(name string) *string {
		if v := form.Value[name]; len(v) > 0 {
			return &v[0]
		}
		return nil
	}
	if m := field("model"); m != nil {
		req.Model = *m
	}
	req.Prompt, req.Seconds, req.Size = field("prompt"), field("seconds"), field("size")
	return nil
}

// videoCreate answers POST /v1/videos; the job takes over the request's slot.
func (c *call) videoCreate(req *videoRequest) {
	j := c.newJob(false, req.Model)
	j.id = c.sim.jobID(false)
	j.seconds, j.size = "4", "720x1280"
	if req.Seconds != nil {
		j.seconds = *req.Seconds
	}
	if req.Size != nil {
		j.size = *req.Size
	}
	c.sim.addJob(j)
	c.kept = true
	c.json(http.StatusOK, c.sim.videoObject(j, j.created))
}

func (s *Simulator) videoObject(j *job, now time.Time) map[string]any {
	s.jobs.mu.Lock()
	state, progress := j.state(now)
	s.jobs.mu.Unlock()
	v := map[string]any{
		"id": j.id, "object": "video", "model": j.model, "status": state, "progress": progress,
		"created_at": j.created.Unix(), "completed_at": nil, "expires_at": nil,
		"seconds": j.seconds, "size": j.size, "remixed_from_video_id": nil, "error": nil,
	}
	end := j.created.Add(j.dur)
	switch state {
	case jobCompleted:
		v["completed_at"] = end.Unix()
		v["expires_at"] = end.Add(24 * time.Hour).Unix()
	case jobFailed:
		v["error"] = map[string]any{"code": "video_generation_failed", "message": "Video generation failed (simulated)."}
	}
	return v
}

func videoNotFound(id string) []byte {
	return openAIError("Video with id '"+id+"' not found.", "invalid_request_error", "", "video_not_found")
}

// videoFollowUp answers GET /v1/videos/{id}, GET /v1/videos/{id}/content and
// DELETE /v1/videos/{id}.
func (c *call) videoFollowUp(ep endpoint) {
	rest := strings.TrimPrefix(c.r.URL.Path, "/v1/videos/")
	id := strings.TrimSuffix(rest, "/content")
	j := c.sim.lookupJob(id, c.rec.Key, false)
	if j == nil {
		c.fail(http.StatusNotFound, videoNotFound(id))
		return
	}
	now := time.Now()
	switch ep {
	case epVideoGet:
		v := c.sim.videoObject(j, now)
		if !terminal(v["status"].(string)) {
			c.w.Header()["Openai-Poll-After-Ms"] = []string{strconv.FormatInt(max(j.dur.Milliseconds()/10, 1), 10)}
		}
		c.json(http.StatusOK, v)
	case epVideoDelete:
		c.sim.jobs.mu.Lock()
		delete(c.sim.jobs.byID, id)
		c.sim.unholdLocked(j)
		c.sim.jobs.mu.Unlock()
		c.json(http.StatusOK, map[string]any{"id": id, "object": "video.deleted", "deleted": true})
	case epVideoContent:
		c.sim.jobs.mu.Lock()
		state, _ := j.state(now)
		c.sim.jobs.mu.Unlock()
		if state != jobCompleted {
			// Not verified against OpenAI: 409 while the video is not ready
			// (or failed), so clients can tell it from an unknown id.
			c.fail(http.StatusConflict, openAIError("Video is not ready yet (status "+state+"); poll GET /v1/videos/"+id+" until it is completed.",
				"invalid_request_error", "", "video_not_ready"))
			return
		}
		switch v := c.r.URL.Query().Get("variant"); v {
		case "", "video":
			c.respond(http.StatusOK, "video/mp4", fakeMP4(id))
		case "thumbnail":
			c.respond(http.StatusOK, "image/webp", []byte("RIFF\x0c\x00\x00\x00WEBPVP8 "))
		case "spritesheet":
			c.respond(http.StatusOK, "image/jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\xff\xd9"))
		default:
			c.fail(http.StatusBadRequest, oneOf("variant", v, []string{"video", "thumbnail", "spritesheet"}).body)
		}
	}
}

// fakeMP4 is a small deterministic payload that starts like an MP4 (an ftyp
// box) and carries the video id in a free box.
func fakeMP4(id string) []byte {
	b := []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isommp42")
	n := 8 + len(id)
	b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	b = append(b, "free"...)
	return append(b, id...)
}

// --- fal queue ---

// falPath splits a fal queue path into its segments, or returns nil.
func falPath(p string) []string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/v1/") {
		return nil
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) < 2 {
		return nil
	}
	for _, s := range segs {
		if s == "" {
			return nil
		}
	}
	return segs
}

func falDetail(detail string) []byte {
	b, _ := json.Marshal(map[string]string{"detail": detail})
	return b
}

func (c *call) falURLs(j *job) (status, response, cancel string) {
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + c.r.Host + "/" + j.root + "/requests/" + j.id
	return base + "/status", base, base + "/cancel"
}

// falSubmit answers POST /{owner}/{app}[/{subpath}]; the body must be a JSON
// object (the model input).
func (c *call) falSubmit(body []byte) {
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		c.fail(http.StatusUnprocessableEntity, falValidation("body", "Input should be a valid JSON object"))
		return
	}
	segs := falPath(c.r.URL.Path)
	j := c.newJob(true, strings.Join(segs, "/"))
	j.id = c.sim.jobID(true)
	j.root = segs[0] + "/" + segs[1]
	c.sim.addJob(j)
	c.kept = true
	st, resp, cancel := c.falURLs(j)
	c.w.Header()["X-Fal-Request-Id"] = []string{j.id}
	c.json(http.StatusOK, map[string]any{"status": "IN_QUEUE", "request_id": j.id, "response_url": resp,
		"status_url": st, "cancel_url": cancel, "queue_position": 0})
}

func falValidation(field, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"detail": []map[string]any{{"loc": []string{field}, "msg": msg, "type": "value_error"}}})
	return b
}

// falFollowUp answers status, result and cancel, all under
// /{owner}/{app}/requests/{id}.
func (c *call) falFollowUp(ep endpoint) {
	segs := falPath(c.r.URL.Path)
	id := segs[3]
	j := c.sim.lookupJob(id, c.rec.Key, true)
	if j == nil || j.root != segs[0]+"/"+segs[1] {
		if ep == epFalCancel {
			c.json(http.StatusNotFound, map[string]string{"status": "NOT_FOUND"})
			return
		}
		c.fail(http.StatusNotFound, falDetail("Request not found"))
		return
	}
	now := time.Now()
	c.sim.jobs.mu.Lock()
	state, _ := j.state(now)
	if ep == epFalCancel && !terminal(state) {
		j.cancelled = true
		c.sim.unholdLocked(j)
	}
	c.sim.jobs.mu.Unlock()
	h := c.w.Header()
	h["X-Fal-Request-Id"] = []string{j.id}
	switch ep {
	case epFalCancel:
		if terminal(state) {
			c.json(http.StatusBadRequest, map[string]string{"status": "ALREADY_COMPLETED"})
			return
		}
		c.json(http.StatusAccepted, map[string]string{"status": "CANCELLATION_REQUESTED"})
	case epFalStatus:
		st, resp, cancel := c.falURLs(j)
		v := map[string]any{"request_id": j.id, "response_url": resp, "status_url": st, "cancel_url": cancel}
		logs := []map[string]any{}
		if c.r.URL.Query().Get("logs") == "1" && state != jobQueued {
			logs = []map[string]any{{"message": "simulated run started", "level": "INFO", "timestamp": j.created.UTC().Format(time.RFC3339Nano)}}
		}
		switch state {
		case jobQueued:
			v["status"], v["queue_position"] = "IN_QUEUE", 0
		case jobInProgress:
			v["status"], v["logs"] = "IN_PROGRESS", logs
		default:
			v["status"], v["logs"] = "COMPLETED", logs
			v["metrics"] = map[string]any{"inference_time": j.dur.Seconds()}
			switch state {
			case jobFailed:
				v["error"], v["error_type"] = "Simulated run failure", "runner_error"
			case jobCancelled:
				v["error"], v["error_type"] = "Request was cancelled", "request_cancelled"
			}
		}
		c.json(http.StatusOK, v)
	case epFalResult:
		switch state {
		case jobCompleted:
			c.json(http.StatusOK, map[string]any{
				"video": map[string]any{"url": "https://v3.fal.media/files/simulator/" + j.id + ".mp4",
					"content_type": "video/mp4", "file_name": j.id + ".mp4", "file_size": len(fakeMP4(j.id))},
				"seed": int64(fnvAdd(fnvOffset, j.id) >> 33),
			})
		case jobFailed:
			h["X-Fal-Error-Type"] = []string{"runner_error"}
			c.fail(http.StatusInternalServerError, falDetail("Simulated run failure"))
		case jobCancelled:
			h["X-Fal-Error-Type"] = []string{"request_cancelled"}
			c.fail(http.StatusBadRequest, falDetail("Request was cancelled"))
		default:
			// Not verified against fal: the result of a running request.
			c.fail(http.StatusBadRequest, falDetail("Request is still in progress"))
		}
	}
}
