-- Bind a session-affinity seed to an account unless another request bound
-- or moved it meanwhile (store.Affinity.Bind), and keep its owner's bounds.
-- Each owner's bindings are indexed in a sorted set by when they lapse
-- (last use + their ttl, ms): the key's (members: seeds) and the tenant's
-- (members: key .. "\0" .. seed). Lapsed members leave the indexes on every
-- bind, so an index holds live bindings only, whatever ttl each has (ttls
-- differ by model; scored by last use, a busy key's index kept every lapsed
-- session up to its bound). Past a bound the ones lapsing soonest (the
-- least recently used, for one ttl) leave the indexes here, and are
-- returned for the caller to delete (with their key's index entry): a
-- script may touch only the keys it declares. (Members an earlier version
-- scored by last use read as lapsed and leave the index at once; their
-- bindings live on until their ttl, uncounted by the bounds meanwhile.)
-- KEYS[1]: P{d:D}:aff:<seed>   KEYS[2]: the key's index   KEYS[3]: the tenant's index
-- ARGV: from ("" = saw none), to, ttl (ms), seed, now (ms), key ID,
--       the key bound, the tenant bound
-- Returns the account bound, then the forgotten bindings as key .. "\0" .. seed.
local cur = redis.call('GET', KEYS[1])
local out = {cur}
if not cur or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  out[1] = ARGV[2]
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
local ttl = tonumber(ARGV[3])
local now = tonumber(ARGV[5])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[6] .. '\0' .. ARGV[4])
for i = 2, 3 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
end
for i = 2, 3 do
  -- An index lapses with the last binding it could hold.
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[7])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do
    local member = ARGV[6] .. '\0' .. gone[i]
    redis.call('ZREM', KEYS[3], member)
    out[#out + 1] = member
  end
end
over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[8])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[3], over)
  for i = 1, #gone, 2 do
    out[#out + 1] = gone[i]
  end
end
return out
