package admin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Every write the admin API serves is recorded in the audit log, by
// construction: ServeHTTP sends each routed POST, PUT, PATCH or DELETE of a
// write token through record, which appends one entry once the answer is
// written, whether the write succeeded or failed (Status and Error say
// which). A write refused before routing (no or unknown token, a read
// token, an unknown path) changes nothing and is only logged. The route
// (see write) adds the action, the targets and their state before and
// after, in the views operators see: never a key's hash or plaintext, never
// an upstream secret.

// auditRecorder is the ResponseWriter of one write: it remembers the status
// and, for the subjects that name their target in the answer, the answer.
type auditRecorder struct {
	http.ResponseWriter
	entry  catalog.AuditEntry
	status int
	answer bytes.Buffer
	keep   bool // keep the answer: the subject reads its targets from it
}

func (rec *auditRecorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *auditRecorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.keep && rec.answer.Len()+len(b) <= maxBody {
		rec.answer.Write(b)
	}
	return rec.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (rec *auditRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// recorderOf returns the audit recorder of a write's ResponseWriter, or nil.
func recorderOf(w http.ResponseWriter) *auditRecorder {
	rec, _ := w.(*auditRecorder)
	return rec
}

// record serves the write r of the token, then appends its audit entry.
func (s *server) record(w http.ResponseWriter, r *http.Request, by token, pattern string) {
	rec := &auditRecorder{ResponseWriter: w, entry: catalog.AuditEntry{
		TokenID: by.id, Remote: authn.Source(r), Method: r.Method, Path: r.URL.Path,
	}}
	s.mux.ServeHTTP(rec, r)
	e := &rec.entry
	if e.Action == "" { // a route registered without write(): still recorded
		e.Action = pattern
	}
	e.At, e.Status = s.now().UTC(), cmp.Or(rec.status, http.StatusOK)
	if s.audit == nil {
		return
	}
	// The answer is out: the entry must be stored even if the caller has gone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.audit.AppendAudit(ctx, e); err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "audit entry lost", slog.String("action", e.Action),
			slog.String("token_id", e.TokenID), slog.Any("targets", e.Targets), slog.Int("status", e.Status), slog.Any("err", err))
	}
}

// subject is what a write route changes: how to name its targets and how
// the audit log shows their state.
type subject struct {
	// targets names what r changes. It is called before the write with a
	// nil answer, and after it with the answer when keepAnswer is set.
	targets    func(r *http.Request, answer []byte) []string
	keepAnswer bool
	// view is the state of the target id, or nil when there is none. A
	// subject without one notes the entry itself.
	view func(s *server, ctx context.Context, id string) (any, error)
}

var (
	// keyByPath is the key {id} of the route.
	keyByPath = subject{targets: pathID, view: (*server).keyView}
	// keyCreated is the key a create made; only its answer names it.
	keyCreated = subject{targets: createdKey, keepAnswer: true, view: (*server).keyView}
	// accountByPath and credentialByPath are the account or credential {id}.
	accountByPath    = subject{targets: pathID, view: poolView(accountKind)}
	credentialByPath = subject{targets: pathID, view: poolView(credentialKind)}
	// selfNoted is a write that notes its own targets and their state (a
	// batch, whose targets only it knows).
	selfNoted = subject{}
	// theCatalog is the catalog document serving.
	theCatalog = subject{targets: func(*http.Request, []byte) []string { return []string{"catalog"} }, view: (*server).catalogView}
)

func pathID(r *http.Request, _ []byte) []string { return []string{r.PathValue("id")} }

// createdKey reads the ID of the key an IssuedKey answer holds; the answer's
// plaintext goes nowhere.
func createdKey(_ *http.Request, answer []byte) []string {
	var issued struct {
		Record struct {
			ID string `json:"id"`
		} `json:"record"`
	}
	if answer == nil || json.Unmarshal(answer, &issued) != nil || issued.Record.ID == "" {
		return nil
	}
	return []string{issued.Record.ID}
}

// write registers the write route pattern (an action recorded as action,
// changing sub) on the mux. The handler it registers notes the targets'
// state before and after fn runs in the request's audit entry.
func (s *server) write(pattern, action string, sub subject, fn func(http.ResponseWriter, *http.Request) error) {
	s.routes = append(s.routes, route{pattern: pattern, action: action})
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := recorderOf(w)
		if rec == nil { // not through ServeHTTP: only tests of the mux itself
			s.handle(fn)(w, r)
			return
		}
		rec.entry.Action, rec.keep = action, sub.keepAnswer
		if sub.view == nil {
			s.handle(fn)(w, r)
			return
		}
		before := s.views(r.Context(), sub, sub.targets(r, nil))
		s.handle(fn)(w, r)
		var answer []byte
		if sub.keepAnswer {
			answer = rec.answer.Bytes()
		}
		ids := sub.targets(r, answer)
		rec.entry.Targets, rec.entry.Before, rec.entry.After = ids, before, s.views(r.Context(), sub, ids)
		rec.answer.Reset() // a created key's plaintext is in it
	})
}

// read registers the read route pattern on the mux.
func (s *server) read(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
	s.routes = append(s.routes, route{pattern: pattern})
	s.mux.HandleFunc(pattern, s.handle(fn))
}

// route is a registered route: its pattern and, for a write, its audit action.
type route struct {
	pattern string
	action  string
}

// views is the JSON object of the targets' views: ID → view, null for a
// target that does not exist. It is nil when there are no targets.
func (s *server) views(ctx context.Context, sub subject, ids []string) json.RawMessage {
	if len(ids) == 0 {
		return nil
	}
	out := make(map[string]any, len(ids))
	for _, id := range ids {
		v, err := sub.view(s, ctx, id)
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "audit: read the state of a target", slog.String("target", id), slog.Any("err", err))
		}
		out[id] = v
	}
	b, err := json.Marshal(out)
	if err != nil { // only our own view types reach here: a bug
		s.log.LogAttrs(ctx, slog.LevelError, "audit: encode views", slog.Any("err", err))
		return nil
	}
	return b
}

// keyView is the key as GET /admin/keys/{id} shows it, or nil.
func (s *server) keyView(ctx context.Context, id string) (any, error) {
	k, err := s.keys.Load(ctx, id)
	if err != nil {
		if errors.Is(err, catalog.ErrNotFound) {
			err = nil
		}
		return nil, err
	}
	return keyRecord(k, s.now()), nil
}

// poolState is what an operator changes on an account or credential.
type poolState struct {
	Status sluice.UpstreamStatus `json:"status"`
	Reason string                `json:"reason,omitempty"` // why, e.g. an operator's suspension
}

// poolView shows the status of an account or credential, or nil.
func poolView[T any](k poolKind[T]) func(s *server, ctx context.Context, id string) (any, error) {
	return func(s *server, ctx context.Context, id string) (any, error) {
		if s.pool == nil {
			return nil, nil
		}
		items, err := k.list(s.pool, ctx)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(items, func(it T) bool { return k.id(it) == id }); i >= 0 {
			return poolState{Status: k.status(items[i]), Reason: k.reason(items[i])}, nil
		}
		return nil, nil
	}
}

// catalogState is the serving catalog as the audit log shows it: the
// documents themselves are kept by version in the store.
type catalogState struct {
	Version int64  `json:"version"`
	Source  string `json:"source"`
	SHA256  string `json:"sha256"` // of the document
}

func (s *server) catalogView(context.Context, string) (any, error) {
	if s.catalog == nil {
		return nil, nil
	}
	st := s.catalog.Status()
	sum := sha256.Sum256(st.Document)
	return catalogState{Version: st.Version, Source: st.Source, SHA256: hex.EncodeToString(sum[:])}, nil
}

// AuditEntry is an audit log entry as the admin API shows it.
type AuditEntry struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	TokenID string          `json:"token_id"`
	Remote  string          `json:"remote"`
	Method  string          `json:"method"`
	Path    string          `json:"path"`
	Action  string          `json:"action"`
	Targets []string        `json:"targets"`
	Status  int             `json:"status"`
	Error   string          `json:"error,omitempty"`
	Before  json.RawMessage `json:"before,omitempty"` // target ID → its state before; null = none
	After   json.RawMessage `json:"after,omitempty"`  // target ID → its state after
}

func auditView(e catalog.AuditEntry) AuditEntry {
	return AuditEntry{
		ID: e.ID, At: utc(e.At), TokenID: e.TokenID, Remote: e.Remote, Method: e.Method, Path: e.Path,
		Action: e.Action, Targets: nonNil(e.Targets), Status: e.Status, Error: e.Error, Before: e.Before, After: e.After,
	}
}

// Bounds of GET /admin/audit.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// listAudit handles GET /admin/audit?since=&action=&target=&limit=.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway keeps no audit log")
	}
	q := r.URL.Query()
	f := catalog.AuditFilter{Action: q.Get("action"), Target: q.Get("target"), Limit: defaultAuditLimit}
	if err := parseTime(q, "since", &f.Since); err != nil {
		return err
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			return invalid("limit %q is not a number from 1 to %d", v, maxAuditLimit)
		}
		f.Limit = n
	}
	entries, err := s.audit.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]AuditEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditView(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
