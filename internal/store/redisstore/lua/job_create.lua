-- job_create: store a new job binding unless its ID exists.
-- KEYS: the job's hash, the due set, the set of every job. ARGV: id,
-- record (JSON), ended (0/1), next poll (unix ms), expires at (unix ms,
-- 0 = never), queued (unix ms). Returns 1, or 0 if the ID exists.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'ended', ARGV[3])
if ARGV[5] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[5])
end
if ARGV[3] == '0' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
return 1
