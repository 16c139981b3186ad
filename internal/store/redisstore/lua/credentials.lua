-- credentials: reap, then return the in-flight count of each credential.
-- ARGV: wake prefix, credential ids.
local now = now_ms()
wake_all(reap(now), now, ARGV[1])
local out = {}
for i = 2, #ARGV do
  out[i - 1] = tonumber(redis.call('HGET', K_CRED, ARGV[i])) or 0
end
return out
