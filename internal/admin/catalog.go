package admin

import (
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice"
)

// status handles GET /admin/status.
func (s *server) status(w http.ResponseWriter, r *http.Request) error {
	var st Status
	if s.catalog != nil {
		st.CatalogStatus = s.catalog.Status()
	}
	if st.Aliases == nil {
		st.Aliases = []string{}
	}
	st.Replicas = s.replicas(r)
	st.Keys = s.keyCounts(r)
	st.Accounts = poolCounts(s, r, accountKind)
	st.Credentials = poolCounts(s, r, credentialKind)
	writeJSON(w, http.StatusOK, st)
	return nil
}

// keyCounts counts stored keys by effective status. It reads every key once,
// which is cheap at the scale of an operator's key list; on failure it logs
// and returns nil, which leaves the counts out of the status.
func (s *server) keyCounts(r *http.Request) map[sluice.KeyStatus]int {
	if s.keys == nil {
		return nil
	}
	keys, err := s.keys.List(r.Context())
	if err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "status: list keys", slog.Any("err", err))
		return nil
	}
	now := s.now()
	counts := make(map[sluice.KeyStatus]int)
	for _, k := range keys {
		counts[k.EffectiveStatus(now)]++
	}
	return counts
}

// getCatalog handles GET /admin/catalog: the YAML serving now, with the
// passwords of its URLs redacted.
func (s *server) getCatalog(w http.ResponseWriter, _ *http.Request) error {
	if s.catalog == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway has no catalog")
	}
	st := s.catalog.Status()
	w.Header().Set("Content-Type", "text/yaml; charset=utf-8")
	w.Header().Set("ETag", ETag(st.Tag()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(redactPasswords(st.Document))
	return nil
}

// applyCatalog handles PUT /admin/catalog[?force=true]. A forced apply
// is audited as catalog.apply_forced.
func (s *server) applyCatalog(w http.ResponseWriter, r *http.Request) error {
	if s.catalog == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway has no catalog")
	}
	ifVersion, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	force, err := parseForce(r)
	if err != nil {
		return err
	}
	action := "catalog.apply"
	if force {
		action = "catalog.apply_forced"
		if rec := recorderOf(w); rec != nil {
			rec.entry.Action = action
		}
	}
	doc, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(doc) == 0 {
		return invalid("the request body is empty; want the catalog YAML")
	}
	st, err := s.catalog.Apply(r.Context(), doc, ifVersion, force, tokenOf(w))
	if err != nil {
		return catalogError(err)
	}
	if st.Aliases == nil {
		st.Aliases = []string{}
	}
	s.wrote(r.Context(), action, slog.Int64("version", st.Version), slog.Int64("if_version", ifVersion),
		slog.Int("bytes", len(doc)))
	w.Header().Set("ETag", ETag(st.Tag()))
	writeJSON(w, http.StatusOK, st)
	return nil
}
