-- probe: the unit's post-cooldown probe succeeded at its first byte. Open
-- the unit as a successful release would (cooldown and backoff level
-- cleared), keep the lease as an ordinary one, and wake waiters.
-- ARGV: lease, wake prefix. Returns 1 when the unit was opened, else 0 (the
-- lease is not the unit's live probe).
local now = now_ms()
local lease, prefix = ARGV[1], ARGV[2]
wake_all(reap(now), now, prefix)
if not live_lease(lease, now) then
  return 0
end
local l = split(redis.call('HGET', K_LEASE, lease) or '', '\31')
if l[4] ~= '1' or redis.call('HGET', K_UNIT, l[1] .. '\0probe') ~= lease then
  return 0
end
redis.call('HDEL', K_UNIT, l[1] .. '\0until', l[1] .. '\0probe', l[1] .. '\0level')
l[4] = '0'
redis.call('HSET', K_LEASE, lease, table.concat(l, '\31'))
wake(l[1], now, prefix)
return 1
