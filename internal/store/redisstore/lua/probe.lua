-- probe: the post-cooldown probe of the lease's unit (or of one of its
-- limits, see store.Outcome.Cool) succeeded at its first byte. Open what it
-- probes as a successful release would (cooldown and backoff level
-- cleared), keep the lease as an ordinary one, and wake waiters.
-- ARGV: lease, wake prefix. Returns 1 when something was opened, else 0
-- (the lease is no live probe).
local now = now_ms()
local lease, prefix = ARGV[1], ARGV[2]
wake_all(reap(now), now, prefix)
if not live_lease(lease, now) then
  return 0
end
local l = split(redis.call('HGET', K_LEASE, lease) or '', '\31')
local opened = {}
if l[4] == '1' and redis.call('HGET', K_UNIT, l[1] .. '\0probe') == lease then
  opened[#opened + 1] = l[1]
  l[4] = '0'
end
local holds = {}
for e in string.gmatch(l[11] or '', '[^\30]+') do
  local f = split(e, '\0')
  if f[8] == '1' and redis.call('HGET', K_UNIT, f[1] .. '\0probe') == lease then
    opened[#opened + 1] = f[1]
    f[8] = '0'
  end
  holds[#holds + 1] = table.concat(f, '\0')
end
if #opened == 0 then
  return 0
end
l[11] = table.concat(holds, '\30')
redis.call('HSET', K_LEASE, lease, table.concat(l, '\31'))
for _, u in ipairs(opened) do
  redis.call('HDEL', K_UNIT, u .. '\0until', u .. '\0probe', u .. '\0level')
  wake(u, now, prefix)
end
return 1
