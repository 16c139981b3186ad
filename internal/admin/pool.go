package admin

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// poolKind is what the account routes and the credential routes share: how
// to list the items of one kind, read their ID and status, and show them.
type poolKind[T any] struct {
	name   string // "account" or "credential": in messages, log actions ("accounts.disable") and log keys ("account_id")
	list   func(Pool, context.Context) ([]T, error)
	id     func(T) string
	status func(T) sluice.UpstreamStatus
	reason func(T) string
	view   func(T) T
	// detail adds to an item shown what only its own GET shows (a
	// listing leaves it out); nil for none.
	detail func(*server, context.Context, T) (T, error)
}

var (
	accountKind = poolKind[AccountState]{
		name:   "account",
		list:   Pool.Accounts,
		id:     func(a AccountState) string { return a.ID },
		status: func(a AccountState) sluice.UpstreamStatus { return a.Status },
		reason: func(a AccountState) string { return a.Reason },
		view:   accountView,
		detail: (*server).accountPicture,
	}
	credentialKind = poolKind[CredentialState]{
		name:   "credential",
		list:   Pool.Credentials,
		id:     func(c CredentialState) string { return c.ID },
		status: func(c CredentialState) sluice.UpstreamStatus { return c.Status },
		reason: func(c CredentialState) string { return c.Reason },
		view:   credentialView,
	}
)

// needPool answers 404 on a gateway without a Pool.
func (s *server) needPool() error {
	if s.pool == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway has no upstream pool")
	}
	return nil
}

// listAll handles GET /admin/accounts and GET /admin/credentials.
func listAll[T any](s *server, k poolKind[T]) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.needPool(); err != nil {
			return err
		}
		items, err := k.list(s.pool, r.Context())
		if err != nil {
			return err
		}
		out := make([]T, 0, len(items))
		for _, it := range items {
			out = append(out, k.view(it))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// showOne handles GET /admin/accounts/{id} and GET /admin/credentials/{id},
// with the kind's detail.
// It finds the item in the full list, which is cheap at the scale of a
// catalog and keeps Pool small.
func showOne[T any](s *server, k poolKind[T]) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.needPool(); err != nil {
			return err
		}
		id := r.PathValue("id")
		items, err := k.list(s.pool, r.Context())
		if err != nil {
			return err
		}
		i := slices.IndexFunc(items, func(it T) bool { return k.id(it) == id })
		if i < 0 {
			return poolError(k.name, id, catalog.ErrNotFound)
		}
		v := k.view(items[i])
		if k.detail != nil {
			if v, err = k.detail(s, r.Context(), v); err != nil {
				return err
			}
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
}

// setAccount handles POST /admin/accounts/{id}/disable and enable.
func (s *server) setAccount(action string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.needPool(); err != nil {
			return err
		}
		id := r.PathValue("id")
		a, err := s.pool.SetAccount(r.Context(), id, action)
		return poolAnswer(s, w, r, accountKind, action, id, a, err)
	}
}

// setCredential handles POST /admin/credentials/{id}/disable, drain, enable
// and remove. Only remove reads a body (Removal) or ?force=.
func (s *server) setCredential(action string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.needPool(); err != nil {
			return err
		}
		var force bool
		var attrs []slog.Attr
		if action == "remove" {
			var err error
			if force, err = forced(w, r); err != nil {
				return err
			}
			attrs = append(attrs, slog.Bool("force", force))
		}
		id := r.PathValue("id")
		c, err := s.pool.SetCredential(r.Context(), id, action, force)
		return poolAnswer(s, w, r, credentialKind, action, id, c, err, attrs...)
	}
}

// forced reads whether a remove is forced: {"force":true} in the body or
// ?force=true in the query; either one forces it.
func forced(w http.ResponseWriter, r *http.Request) (bool, error) {
	var body Removal
	if err := decodeJSON(w, r, &body, true); err != nil {
		return false, err
	}
	q, err := parseForce(r)
	return body.Force || q, err
}

// poolAnswer finishes a change to one account or credential: logs it and
// sends its state.
func poolAnswer[T any](s *server, w http.ResponseWriter, r *http.Request, k poolKind[T], action, id string, v T, err error, attrs ...slog.Attr) error {
	if err != nil {
		return poolError(k.name, id, err)
	}
	s.wrote(r.Context(), k.name+"s."+action,
		append([]slog.Attr{slog.String(k.name+"_id", id), slog.String("status", string(k.status(v)))}, attrs...)...)
	writeJSON(w, http.StatusOK, k.view(v))
	return nil
}

// poolCounts counts the accounts or credentials by status for GET
// /admin/status. On failure it logs and returns nil, which leaves the counts
// out of the status.
func poolCounts[T any](s *server, r *http.Request, k poolKind[T]) map[sluice.UpstreamStatus]int {
	if s.pool == nil {
		return nil
	}
	items, err := k.list(s.pool, r.Context())
	if err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "status: list "+k.name+"s", slog.Any("err", err))
		return nil
	}
	counts := make(map[sluice.UpstreamStatus]int)
	for _, it := range items {
		counts[k.status(it)]++
	}
	return counts
}
