-- Bind a session-affinity seed to an account unless another request bound
-- or moved it meanwhile (store.Affinity.Bind): one round trip, atomic.
-- KEYS[1]: P{d:D}:aff:<seed>   ARGV: from ("" = saw none), to, ttl (ms)
local cur = redis.call('GET', KEYS[1])
if not cur or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return ARGV[2]
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return cur
