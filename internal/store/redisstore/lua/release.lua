-- release: drop the lease once, apply the outcome to its unit, wake waiters.
-- ARGV: lease, rate_limited (0/1), retry_after_ms, success (0/1), wake prefix.
-- Returns {released (0/1), wakes published}.
local now = now_ms()
local reaped = reap(now)
local prefix = ARGV[5]
wake_all(reaped, now, prefix)
if not live_lease(ARGV[1], now) then
  return {0, 0} -- already released, expired or unknown: never count twice
end
local l = drop_lease(ARGV[1])
if not l then
  return {0, 0}
end
local u = l[1]
if apply(l, now, ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4] == '1') then
  return {1, 0} -- the unit is cooling: a wake-up could not be granted
end
return {1, wake(u, now, prefix)}
