-- reassert: after the state was lost, make the leases a replica still
-- holds live again, with their slots and reservations, unless they are
-- (a retried call changes nothing). Not as probes: lost state has no
-- cooldown. ARGV: n, then n × (lease, ttl_ms, unit, cred, index, base_ms,
-- max_ms, tokens, rpm, tpm, daily, lstart, lcount, dreq), then the limits,
-- each (id, rpm, tpm, daily, base_ms, max_ms, dreq); lstart, lcount as in
-- acquire. Returns the state
-- generation, which the replica knows from then on.
local gen = state_gen()
local now = now_ms()
read_reap()
local today = math.floor(now / DAY)
local n = tonumber(ARGV[1])
local A, W = 2, 14
local L, LW = A + n * W, 7

-- hold takes a slot in unit u and reserves one request and tokens in its
-- windows and days (tokens, and one of its dreq requests), unconditionally:
-- the grant was decided before the loss. It returns the tokens reserved
-- against tpm and daily, and the day.
local function hold(u, tokens, rpm, tpm, daily, dreq)
  redis.call('HINCRBY', K_UNIT, u .. '\0n', 1)
  local v = redis.call('HMGET', K_UNIT, u .. '\0rtat', u .. '\0ttat', u .. '\0dday', u .. '\0dused')
  local rt, rd, day = 0, 0, 0
  if rpm > 0 then
    redis.call('HSET', K_UNIT, u .. '\0rtat', string.format('%.3f', math.max(tonumber(v[1]) or 0, now) + 60000 / rpm))
  end
  if tpm > 0 then
    rt = math.max(0, math.min(tokens, tpm))
    redis.call('HSET', K_UNIT, u .. '\0ttat', string.format('%.3f', math.max(tonumber(v[2]) or 0, now) + rt * 60000 / tpm))
  end
  if daily > 0 then
    rd, day = math.max(0, math.min(tokens, daily)), today
    local used = 0
    if tonumber(v[3]) == today then
      used = tonumber(v[4]) or 0
    end
    redis.call('HSET', K_UNIT, u .. '\0dday', today, u .. '\0dused', used + rd)
  end
  if dreq > 0 then
    redis.call('HSET', K_UNIT, u .. '\0qday', today, u .. '\0qn', requests_today(u, today) + 1)
  end
  return rt, rd, day
end

for i = 0, n - 1 do
  local b = A + i * W
  local id = ARGV[b]
  if not live_lease(id, now) then
    local u, cred, tokens = ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 7])
    local tpm = tonumber(ARGV[b + 9])
    local lrec = {}
    for j = 0, tonumber(ARGV[b + 12]) - 1 do
      local x = L + (tonumber(ARGV[b + 11]) + j) * LW
      local lid, ltpm = ARGV[x], tonumber(ARGV[x + 2])
      local rt, rd, day = hold(lid, tokens, tonumber(ARGV[x + 1]), ltpm, tonumber(ARGV[x + 3]), tonumber(ARGV[x + 6]))
      redis.call('ZREM', K_LAPSE, lid)
      lrec[#lrec + 1] = limit_hold(lid, rt, ltpm, rd, day, ARGV[x + 4], ARGV[x + 5], 0)
    end
    local rt, rd, day = hold(u, tokens, tonumber(ARGV[b + 8]), tpm, tonumber(ARGV[b + 10]), tonumber(ARGV[b + 13]))
    redis.call('HINCRBY', K_CRED, cred, 1)
    redis.call('HSET', K_LEASE, id, lease_record(u, cred, ARGV[b + 4], 0, ARGV[b + 5], ARGV[b + 6], rt, tpm, rd, day, lrec))
    redis.call('ZADD', K_EXP, now + tonumber(ARGV[b + 1]), id)
    due(now + tonumber(ARGV[b + 1]))
  end
end
return gen
