-- job_due: take the given jobs that are still due for a poll and defer
-- their next one, so that no other poller takes them meanwhile.
-- KEYS: the shard's due set. ARGV: now (unix ms), deferred next poll (unix
-- ms), then the IDs. Returns the IDs taken.
local now = tonumber(ARGV[1])
local taken = {}
for i = 3, #ARGV do
  local at = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if at and tonumber(at) <= now then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i])
    taken[#taken + 1] = ARGV[i]
  end
end
return taken
