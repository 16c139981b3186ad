-- renew: push the expiry of live leases to now + ttl; ignore the others.
-- KEYS: exp, gen and unit only. ARGV: ttl_ms, the state generation the
-- replica knows (0 = none), lease ids. Returns how many were renewed, or -1
-- when the state was lost since (another generation, or none): the replica
-- must reassert its leases.
local g = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] ~= '0' and g ~= tonumber(ARGV[2]) then
  return -1
end
local now = now_ms()
local expires = now + tonumber(ARGV[1])
local n = 0
for i = 3, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then
    redis.call('ZADD', KEYS[1], 'XX', expires, ARGV[i])
    n = n + 1
  end
end
-- A shorter TTL than a lease had may bring its expiry before the unit
-- hash's reap time ("\0reap", see lib.lua's F_REAP): lower it.
if n > 0 and expires < (tonumber(redis.call('HGET', KEYS[3], '\0reap')) or 0) then
  redis.call('HSET', KEYS[3], '\0reap', string.format('%d', expires))
end
return n
