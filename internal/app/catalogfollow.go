package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/catalog"
	"github.com/sluicehq/sluice/internal/periodic"
)

// How replicas sharing a database follow the stored catalog and see each
// other. catalogPoll bounds how long a version stored through one replica
// takes to serve on every other (the brief read of the latest version
// number is all a poll costs while nothing changes); a replica writes its
// heartbeat every replicaBeat, is listed while seen within replicaLive,
// and its row is deleted once unseen for replicaPrune.
const (
	catalogPoll  = 500 * time.Millisecond
	replicaBeat  = time.Second
	replicaLive  = 10 * time.Second
	replicaPrune = time.Minute
)

// follow loads every version stored after the one serving until ctx ends.
// It runs unless a file manages the catalog: a file wins over the store.
func (s *catalogSource) follow(ctx context.Context) {
	failing := false // the last poll failed, and was reported
	periodic.Run(ctx, catalogPoll, func(ctx context.Context) {
		err := s.catchUp(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			s.log.LogAttrs(ctx, slog.LevelWarn, "reading the stored catalog failed; the catalog serving stays", slog.Any("err", err))
			failing = true
		case err == nil && failing:
			s.log.LogAttrs(ctx, slog.LevelInfo, "reading the stored catalog works again")
			failing = false
		}
	})
}

// catchUp loads the latest stored version when it is newer than the one
// serving. A version that does not load here (an environment variable it
// names is missing on this replica, say) is reported once and not tried
// again: the last good catalog serves until a newer version loads.
func (s *catalogSource) catchUp(ctx context.Context) error {
	latest, err := s.docs.LatestCatalogVersion(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	behind := latest > s.stored && latest != s.refused
	s.mu.Unlock()
	if !behind {
		return nil
	}
	v, err := s.docs.LoadCatalogVersion(ctx, latest)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.Version <= s.stored { // an apply through this replica got there first
		return nil
	}
	if s.reload(v.Doc, "store", v.Version) != nil {
		s.refused = v.Version
	}
	return nil
}

// heartbeat writes this replica's row every replicaBeat until ctx ends, and
// deletes the rows of replicas long gone.
func (s *catalogSource) heartbeat(ctx context.Context) {
	failing := false // the last beat failed, and was reported
	beat := func(ctx context.Context) {
		r := s.heartbeatRow()
		err := s.replicas.BeatReplica(ctx, r)
		if err == nil {
			_, err = s.replicas.PruneReplicas(ctx, r.SeenAt.Add(-replicaPrune))
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			s.log.LogAttrs(ctx, slog.LevelWarn, "replica heartbeat failed; other replicas stop listing this one", slog.Any("err", err))
			failing = true
		case err == nil && failing:
			s.log.LogAttrs(ctx, slog.LevelInfo, "replica heartbeat works again")
			failing = false
		}
	}
	beat(ctx)
	periodic.Run(ctx, replicaBeat, beat)
}

// heartbeatRow is this replica as its heartbeat describes it now.
func (s *catalogSource) heartbeatRow() catalog.Replica {
	st := s.Status()
	return catalog.Replica{ID: s.replica, Source: st.Source, Version: st.StoredVersion, Since: st.LoadedAt,
		LastError: st.LastError, LastErrorAt: st.LastErrorAt, SeenAt: time.Now()}
}

// Replicas returns the replicas on the database seen within replicaLive.
func (s *catalogSource) Replicas(ctx context.Context) ([]catalog.Replica, error) {
	return s.replicas.ListReplicas(ctx, time.Now().Add(-replicaLive))
}
