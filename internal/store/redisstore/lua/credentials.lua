-- credentials: reap, then return the in-flight count of each credential.
-- ARGV: credential ids.
reap(now_ms())
local out = {}
for i, c in ipairs(ARGV) do
  out[i] = tonumber(redis.call('HGET', K_CRED, c)) or 0
end
return out
