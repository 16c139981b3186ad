-- release: drop the lease once, apply the outcome to its unit, wake waiters.
-- ARGV: lease, rate_limited (0/1), retry_after_ms, success (0/1), wake prefix,
-- tokens used (0 = not measured: the TPM reservation stands).
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
-- Correct the TPM window from the lease's reservation (l[7], under TPM
-- l[8]) to the tokens used: back, never before now, or forward.
local used, reserved, tpm = tonumber(ARGV[6]) or 0, tonumber(l[7]) or 0, tonumber(l[8]) or 0
if used > 0 and tpm > 0 then
  local f = u .. '\0ttat'
  local tat = (tonumber(redis.call('HGET', K_UNIT, f)) or 0) + (used - reserved) * 60000 / tpm
  redis.call('HSET', K_UNIT, f, string.format('%.3f', math.max(tat, now)))
end
if apply(l, now, ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4] == '1') then
  return {1, 0} -- the unit is cooling: a wake-up could not be granted
end
return {1, wake(u, now, prefix)}
