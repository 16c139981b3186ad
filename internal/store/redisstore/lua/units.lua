-- units: reap, then report each unit as 9 integers: in flight, cap,
-- cooling until (ms, 0 = none), level, probe (0 none, 1 available,
-- 2 in flight), waiting of class 0, 1 and 2, effective cap (0 = none). ARGV: wake prefix, unit ids.
local now = now_ms()
wake_all(reap(now), now, ARGV[1])
local out = {}
for i = 2, #ARGV do
  local u = ARGV[i]
  local v = redis.call('HMGET', K_UNIT, u .. '\0n', u .. '\0cap', u .. '\0until', u .. '\0level', u .. '\0probe',
    u .. '\0w0', u .. '\0w1', u .. '\0w2', u .. '\0ecap')
  local untl = tonumber(v[3]) or 0
  local probe = 0
  if v[5] then
    probe = 2
  elseif untl ~= 0 and now >= untl then
    probe = 1
  end
  out[#out + 1] = tonumber(v[1]) or 0
  out[#out + 1] = tonumber(v[2]) or 0
  out[#out + 1] = untl
  out[#out + 1] = tonumber(v[4]) or 0
  out[#out + 1] = probe
  out[#out + 1] = tonumber(v[6]) or 0
  out[#out + 1] = tonumber(v[7]) or 0
  out[#out + 1] = tonumber(v[8]) or 0
  out[#out + 1] = tonumber(v[9]) or 0
end
return out
