-- Use a session-affinity binding (store.Affinity.Touch): its expiry is
-- pushed back, and so is when it lapses in its owner's indexes (see
-- affinity_bind.lua). One round trip, atomic.
-- KEYS[1]: P{d:D}:aff:<seed>   KEYS[2]: the key's index   KEYS[3]: the tenant's index
-- ARGV: ttl (ms), seed, now (ms), key ID
local account = redis.call('GETEX', KEYS[1], 'PX', ARGV[1])
if not account then
  return false
end
local lapses = tonumber(ARGV[3]) + tonumber(ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', lapses, ARGV[2])
redis.call('ZADD', KEYS[3], 'XX', lapses, ARGV[4] .. '\0' .. ARGV[2])
for i = 2, 3 do
  redis.call('PEXPIRE', KEYS[i], ARGV[1], 'GT')
end
return account
