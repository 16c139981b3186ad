package redisstore

import (
	"context"
	"time"
)

// The test build of the capacity library has a clock per domain that tests
// set (SetClock); a domain whose clock was never set runs on TIME. The
// gateway's library has neither the clock nor the function that sets it:
// this file is compiled into tests only.
const luaTestClock = `
local fake_ms = {}
test_clock = function()
  return fake_ms[string.match(K_LEASE, '{d:.-}')]
end
`

// clockScript sets the clock of the bound domain to ARGV[1] (ms); 0
// gives it back to TIME.
var clockScript = &function{base: "clock", body: "local ms = tonumber(ARGV[1])\nif ms == 0 then ms = nil end\nfake_ms[string.match(K_LEASE, '{d:.-}')] = ms\nreturn 1"}

func init() {
	capacityLib = newLibrary(luaLib+luaTestClock, acquireScript, releaseScript, cancelScript, renewScript, probeScript,
		reassertScript, unitsScript, credentialsScript, clockScript)
}

// SetClock makes now (to the ms) the clock of the capacity calls of each
// of domains, on whichever primary holds it; the zero time gives them
// back to TIME.
func (s *Store) SetClock(ctx context.Context, now time.Time, domains []string) error {
	var ms int64
	if !now.IsZero() {
		ms = now.UnixMilli()
	}
	for _, d := range domains {
		args := append(clockScript.call(s.domain(d).keyArgs[:1], 1), ms)
		if err := s.fcall(ctx, clockScript, args).Err(); err != nil {
			return err
		}
	}
	return nil
}

// LoseState deletes the capacity state of each of domains, as a Redis
// restarted empty would lose it; the test clock, held by the library,
// stays.
func (s *Store) LoseState(ctx context.Context, domains []string) error {
	for _, d := range domains {
		if err := s.rdb.Del(ctx, s.domain(d).keys...).Err(); err != nil {
			return err
		}
	}
	return nil
}
