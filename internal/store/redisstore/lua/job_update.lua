-- job_update: replace a job binding unless it has ended (a job ends once).
-- KEYS and ARGV as job_create. Returns 1 if replaced, 0 if the stored job
-- has ended, -1 if there is none.
local ended = redis.call('HGET', KEYS[1], 'ended')
if not ended then
  return -1
end
if ended == '1' then
  return 0
end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'ended', ARGV[3])
if ARGV[5] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[5])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
else
  redis.call('PERSIST', KEYS[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 1
