package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/catalog"
)

// CatalogHistory is what the admin API needs of the stored catalog's
// numbered versions and of the replicas serving them. Implementations must
// be safe for concurrent use.
type CatalogHistory interface {
	// Versions returns up to limit stored versions (0 = all), newest
	// first, without their documents and diffs.
	Versions(ctx context.Context, limit int) ([]catalog.CatalogVersion, error)
	// LoadVersion returns a stored version with its document and diff, or
	// an error wrapping catalog.ErrNotFound.
	LoadVersion(ctx context.Context, version int64) (catalog.CatalogVersion, error)
	// Rollback stores version's document as a new version (by is the admin
	// token's ID) and makes it serve. It fails as Apply does, and with an
	// error wrapping catalog.ErrNotFound when there is no such version.
	Rollback(ctx context.Context, version int64, by string) (CatalogStatus, error)
	// Replicas returns the replicas on the database seen lately, by ID.
	Replicas(ctx context.Context) ([]catalog.Replica, error)
}

// CatalogVersion is a stored catalog version as GET
// /admin/catalog/versions lists it. Times are UTC.
type CatalogVersion struct {
	Version      int64     `json:"version"`
	At           time.Time `json:"at"`
	By           string    `json:"by,omitempty"`          // the admin token's ID that stored it
	RollbackOf   int64     `json:"rollback_of,omitempty"` // the version whose document it restores
	Bytes        int       `json:"bytes"`
	LinesAdded   int       `json:"lines_added"` // against the version before
	LinesRemoved int       `json:"lines_removed"`
}

// ReplicaStatus is a gateway on the database, as its heartbeat describes
// it. Times are UTC.
type ReplicaStatus struct {
	ID          string    `json:"id"`
	Source      string    `json:"source"`  // "store", "file:/path", "demo"
	Version     int64     `json:"version"` // the stored catalog version it serves; 0 = not a stored one
	Since       time.Time `json:"since"`   // when it began serving it
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	SeenAt      time.Time `json:"seen_at"`
}

// Bounds of GET /admin/catalog/versions.
const (
	defaultVersionsLimit = 100
	maxVersionsLimit     = 1000
)

// registerCatalogVersions registers the routes of the catalog's history.
func (s *server) registerCatalogVersions() {
	s.read("GET /admin/catalog/versions", s.listCatalogVersions)
	s.read("GET /admin/catalog/versions/{version}", s.showCatalogVersion)
	s.read("GET /admin/catalog/versions/{version}/diff", s.diffCatalogVersions)
	s.write("POST /admin/catalog/versions/{version}/rollback", "catalog.rollback", theCatalog, s.rollbackCatalog)
}

// replicas lists the live replicas for GET /admin/status; on failure it
// logs and returns nil, which leaves them out of the status.
func (s *server) replicas(r *http.Request) []ReplicaStatus {
	if s.catalog == nil {
		return nil
	}
	rs, err := s.catalog.Replicas(r.Context())
	if err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "status: list replicas", slog.Any("err", err))
		return nil
	}
	out := make([]ReplicaStatus, 0, len(rs))
	for _, x := range rs {
		out = append(out, ReplicaStatus{ID: x.ID, Source: x.Source, Version: x.Version, Since: utc(x.Since),
			LastError: x.LastError, LastErrorAt: utc(x.LastErrorAt), SeenAt: utc(x.SeenAt)})
	}
	return out
}

// listCatalogVersions handles GET /admin/catalog/versions?limit=N.
func (s *server) listCatalogVersions(w http.ResponseWriter, r *http.Request) error {
	if s.catalog == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway has no catalog")
	}
	n := defaultVersionsLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxVersionsLimit {
			return invalid("limit %q is not a number from 1 to %d", v, maxVersionsLimit)
		}
	}
	vs, err := s.catalog.Versions(r.Context(), n)
	if err != nil {
		return err
	}
	out := make([]CatalogVersion, 0, len(vs))
	for _, v := range vs {
		out = append(out, CatalogVersion{Version: v.Version, At: utc(v.At), By: v.By, RollbackOf: v.RollbackOf,
			Bytes: v.Bytes, LinesAdded: v.LinesAdded, LinesRemoved: v.LinesRemoved})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// showCatalogVersion handles GET /admin/catalog/versions/{version}: its
// YAML, with the passwords of its URLs redacted.
func (s *server) showCatalogVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/yaml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(redactPasswords(v.Doc))
	return nil
}

// diffCatalogVersions handles GET /admin/catalog/versions/{version}/diff?from=A:
// the unified diff from version A (default: the one before; 0 = nothing)
// to the version, passwords redacted. The diff from the version before is
// the one stored with the version; any other is computed now.
func (s *server) diffCatalogVersions(w http.ResponseWriter, r *http.Request) error {
	to, err := s.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	from := to.Version - 1
	if q := r.URL.Query().Get("from"); q != "" {
		if from, err = strconv.ParseInt(q, 10, 64); err != nil || from < 0 {
			return invalid("from %q is not a catalog version", q)
		}
	}
	diff := to.Diff
	// A version stored before versions had diffs has none, like one equal
	// to the version before: computing it again tells them apart.
	if from != to.Version-1 || diff == "" {
		var before catalog.CatalogVersion
		if from > 0 {
			if before, err = s.loadVersion(r, strconv.FormatInt(from, 10)); err != nil {
				return err
			}
		}
		if diff, _, _, err = catalog.Diff(before.Doc, to.Doc, from, to.Version); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(redactPasswords([]byte(diff)))
	return nil
}

// rollbackCatalog handles POST /admin/catalog/versions/{version}/rollback,
// audited as catalog.rollback.
func (s *server) rollbackCatalog(w http.ResponseWriter, r *http.Request) error {
	if s.catalog == nil {
		return sluice.Errorf(sluice.CodeNotFound, "this gateway has no catalog")
	}
	version, err := parseVersion(r.PathValue("version"))
	if err != nil {
		return err
	}
	st, err := s.catalog.Rollback(r.Context(), version, tokenOf(w))
	if errors.Is(err, catalog.ErrNotFound) {
		return notFound("catalog version", strconv.FormatInt(version, 10), err)
	}
	if err != nil {
		return catalogError(err)
	}
	if st.Aliases == nil {
		st.Aliases = []string{}
	}
	s.wrote(r.Context(), "catalog.rollback", slog.Int64("to", version), slog.Int64("stored_version", st.StoredVersion))
	w.Header().Set("ETag", ETag(st.Tag()))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// loadVersion loads the stored version named by the path segment v.
func (s *server) loadVersion(r *http.Request, v string) (catalog.CatalogVersion, error) {
	if s.catalog == nil {
		return catalog.CatalogVersion{}, sluice.Errorf(sluice.CodeNotFound, "this gateway has no catalog")
	}
	version, err := parseVersion(v)
	if err != nil {
		return catalog.CatalogVersion{}, err
	}
	cv, err := s.catalog.LoadVersion(r.Context(), version)
	if errors.Is(err, catalog.ErrNotFound) {
		return catalog.CatalogVersion{}, notFound("catalog version", v, err)
	}
	return cv, err
}

// parseVersion reads a stored catalog version number (from 1).
func parseVersion(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, invalid("%q is not a catalog version (a number from 1)", v)
	}
	return n, nil
}
