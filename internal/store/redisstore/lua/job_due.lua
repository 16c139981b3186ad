-- job_due: take the jobs due for a poll and defer their next one, so that
-- no other poller takes them meanwhile.
-- KEYS: the due set. ARGV: now (unix ms), deferred next poll (unix ms),
-- limit. Returns the IDs taken, earliest first.
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id)
end
return ids
