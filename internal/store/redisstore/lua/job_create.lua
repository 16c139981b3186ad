-- job_create: store a new job binding unless its ID exists.
-- KEYS: the job's hash, the due set, the set of every job, the expiry set.
-- ARGV: id, record (JSON), ended (0/1), next poll (unix ms), expires at
-- (unix ms, 0 = never), queued (unix ms). Returns 1, or 0 if the ID exists.
-- It also forgets up to 16 jobs of the shard whose record has expired:
-- nothing else removes them from the sets, so each new job sweeps more than
-- it adds and the sets keep only what is live (or about to be swept).
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 16)) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'ended', ARGV[3])
if ARGV[5] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[5])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
end
if ARGV[3] == '0' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
return 1
