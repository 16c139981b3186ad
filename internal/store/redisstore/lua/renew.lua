-- renew: push the expiry of live leases to now + ttl; ignore the others.
-- KEYS: exp only. ARGV: ttl_ms, lease ids. Returns how many were renewed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then
    redis.call('ZADD', KEYS[1], 'XX', expires, ARGV[i])
    n = n + 1
  end
end
return n
