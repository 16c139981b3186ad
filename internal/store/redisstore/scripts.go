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
	//go:embed lua/affinity_touch.lua
	luaAffinityTouch string
)

// The shebang makes Redis 7 enforce declared keys: a script touching an
// undeclared key fails at once instead of working until a reshard.
const shebang = "#!lua\n"

// The job and affinity scripts are small and stand alone: EVALSHA.
var (
	jobCreateScript     = redis.NewScript(shebang + luaJobCreate)
	jobUpdateScript     = redis.NewScript(shebang + luaJobUpdate)
	jobDueScript        = redis.NewScript(shebang + luaJobDue)
	affinityBindScript  = redis.NewScript(shebang + luaAffinityBind)
	affinityTouchScript = redis.NewScript(shebang + luaAffinityTouch)

	allScripts = []*redis.Script{jobCreateScript, jobUpdateScript, jobDueScript, affinityBindScript, affinityTouchScript}
)

// The capacity scripts are one Redis Function library (Redis 7): lib.lua's
// helpers are made once when it loads, not on every call as a script's
// would be (that preamble was about a sixth of an acquire's CPU in Redis).
// Each capacity function binds its domain's keys, then runs its file with
// KEYS and ARGV as parameters. allow-oom lets the functions that free state
// (release, cancel, renew) run when Redis is at maxmemory, so an outage of
// memory does not also pin every lease until it expires. The calls of the
// request path (acquire, release, cancel) have a batch form too, which the
// pipeliner uses for concurrent calls to one domain.
var (
	acquireScript     = &function{base: "acquire", body: luaAcquire, batched: true}
	releaseScript     = &function{base: "release", body: luaOutcome + luaRelease, oom: true, batched: true}
	cancelScript      = &function{base: "cancel", body: luaOutcome + luaCancel, oom: true, batched: true}
	renewScript       = &function{base: "renew", body: luaRenew, oom: true}
	probeScript       = &function{base: "probe", body: luaProbe}
	reassertScript    = &function{base: "reassert", body: luaReassert}
	unitsScript       = &function{base: "units", body: luaUnits}
	credentialsScript = &function{base: "credentials", body: luaCredentials}

	capacityLib = newLibrary(luaLib, acquireScript, releaseScript, cancelScript, renewScript, probeScript, reassertScript,
		unitsScript, credentialsScript)
)
