package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts are assembled from lua/: lib.lua holds the key layout and the
// helpers (reap, dequeue, wake) every capacity script shares.
var (
	//go:embed lua/lib.lua
	luaLib string
	//go:embed lua/outcome.lua
	luaOutcome string
	//go:embed lua/acquire.lua
	luaAcquire string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/cancel.lua
	luaCancel string
	//go:embed lua/renew.lua
	luaRenew string
	//go:embed lua/probe.lua
	luaProbe string
	//go:embed lua/reassert.lua
	luaReassert string
	//go:embed lua/units.lua
	luaUnits string
	//go:embed lua/credentials.lua
	luaCredentials string
	//go:embed lua/job_create.lua
	luaJobCreate string
	//go:embed lua/job_update.lua
	luaJobUpdate string
	//go:embed lua/job_due.lua
	luaJobDue string
	//go:embed lua/affinity_bind.lua
	luaAffinityBind string
)

// The shebang makes Redis 7 enforce declared keys: a script touching an
// undeclared key fails at once instead of working until a reshard.
// allow-oom lets the scripts that free state (release, cancel, renew) run
// when Redis is at maxmemory, so an outage of memory does not also pin every
// lease until it expires.
const (
	shebang    = "#!lua\n"
	shebangOOM = "#!lua flags=allow-oom\n"
)

var (
	acquireScript      = redis.NewScript(shebang + luaLib + luaAcquire)
	releaseScript      = redis.NewScript(shebangOOM + luaLib + luaOutcome + luaRelease)
	cancelScript       = redis.NewScript(shebangOOM + luaLib + luaOutcome + luaCancel)
	renewScript        = redis.NewScript(shebangOOM + luaRenew)
	probeScript        = redis.NewScript(shebang + luaLib + luaProbe)
	reassertScript     = redis.NewScript(shebang + luaLib + luaReassert)
	unitsScript        = redis.NewScript(shebang + luaLib + luaUnits)
	credentialsScript  = redis.NewScript(shebang + luaLib + luaCredentials)
	jobCreateScript    = redis.NewScript(shebang + luaJobCreate)
	jobUpdateScript    = redis.NewScript(shebang + luaJobUpdate)
	jobDueScript       = redis.NewScript(shebang + luaJobDue)
	affinityBindScript = redis.NewScript(shebang + luaAffinityBind)

	allScripts = []*redis.Script{acquireScript, releaseScript, cancelScript, renewScript, probeScript, reassertScript,
		unitsScript, credentialsScript, jobCreateScript, jobUpdateScript, jobDueScript, affinityBindScript}
)
