-- units: reap, then report each unit as 10 integers: in flight, cap,
-- cooling until (ms, 0 = none), level, probe (0 none, 1 available,
-- 2 in flight), waiting of class 0, 1 and 2, effective cap (0 = none),
-- cooled (ms, the cooldowns set so far);
-- then the queue visibility: 3 integers, the arrival (Redis ms, 0 = none)
-- of the oldest live queued ticket of class 0, 1 and 2 listing the unit,
-- then k, the number of tenants, and k × (tenant, count) of the live
-- queued tickets listing the unit. ARGV: wake prefix, unit ids.
--
-- The visibility scan is bounded: of at most VIS_QUEUES queues listing the
-- unit, it looks at the first VIS tickets of each class (in (tag,
-- arrival) order), so a unit with more waiting is under-reported. A ticket
-- queued before arrival times were recorded counts by tenant but not for
-- the oldest.
local VIS, VIS_QUEUES = 256, 64
local now = now_ms()
wake_all(reap(now), now, ARGV[1])

local function visibility(u, out)
  local oldest = {0, 0, 0}
  local counts, tenants = {}, {}
  local needle = '\30' .. u .. '\30'
  for _, m in ipairs(redis.call('ZRANGEBYLEX', K_UQ, '[' .. u .. '\0', '(' .. u .. '\1', 'LIMIT', 0, VIS_QUEUES)) do
    local queue = string.sub(m, #u + 2)
    for c = 0, 2 do
      local lo, hi = '[' .. queue .. '\0' .. c, '(' .. queue .. '\0' .. (c + 1)
      for _, mem in ipairs(redis.call('ZRANGEBYLEX', K_Q, lo, hi, 'LIMIT', 0, VIS)) do
        local t = member_ticket(mem, queue)
        local rec = redis.call('HGET', K_TIX, t)
        local seen = tonumber(redis.call('ZSCORE', K_SEEN, t))
        if rec and seen and seen > now and string.find(rec, needle, 1, true) then
          local r = split(rec, '\31')
          local tenant = r[5] or ''
          if not counts[tenant] then
            counts[tenant] = 0
            tenants[#tenants + 1] = tenant
          end
          counts[tenant] = counts[tenant] + 1
          local at = #r >= 6 and tonumber(r[#r]) or nil
          if at and (oldest[c + 1] == 0 or at < oldest[c + 1]) then
            oldest[c + 1] = at
          end
        end
      end
    end
  end
  for c = 1, 3 do
    out[#out + 1] = oldest[c]
  end
  out[#out + 1] = #tenants
  for _, tenant in ipairs(tenants) do
    out[#out + 1] = tenant
    out[#out + 1] = counts[tenant]
  end
end

local out = {}
for i = 2, #ARGV do
  local u = ARGV[i]
  local v = redis.call('HMGET', K_UNIT, u .. '\0n', u .. '\0cap', u .. '\0until', u .. '\0level', u .. '\0probe',
    u .. '\0w0', u .. '\0w1', u .. '\0w2', u .. '\0ecap', u .. '\0cooled')
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
  out[#out + 1] = tonumber(v[10]) or 0
  visibility(u, out)
end
return out
