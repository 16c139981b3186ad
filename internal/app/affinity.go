package app

import (
	"context"

	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/store"
)

// affinityBindings shows the admin API the session-affinity bindings of
// the serving catalog's capacity domain.
type affinityBindings struct {
	live     *pipeline.Live
	bindings store.Affinity
}

func (a affinityBindings) Binding(ctx context.Context, seed string) (store.Binding, bool, error) {
	return a.bindings.Binding(ctx, a.live.Load().AffinityDomain, seed)
}
