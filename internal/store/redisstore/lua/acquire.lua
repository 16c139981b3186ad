-- acquire: grant the first eligible candidate, else queue the ticket.
-- ARGV: ticket, queue, replica, ttl_ms, wake prefix, n, then n × (unit,
-- cred, cap, cred_cap, base_ms, max_ms).
-- Returns {1, index, expires_ms, probe} or {0, position, retry_at_ms}.
local now = now_ms()
local ticket, queue, replica = ARGV[1], ARGV[2], ARGV[3]
local ttl, n = tonumber(ARGV[4]), tonumber(ARGV[6])
local reaped = reap(now)

local function decide()
  -- A retried call (or a go-redis retry after a timeout) gets the same grant.
  local held = live_lease(ticket, now)
  local lrec = held and redis.call('HGET', K_LEASE, ticket)
  if lrec then
    local l = split(lrec, '\31')
    return {1, tonumber(l[3]), held, tonumber(l[4])}
  end

  local qrec = redis.call('HGET', K_TIX, ticket)
  local member
  if qrec then
    local r = split(qrec, '\31')
    queue, member = r[1], r[2]
  end

  -- Records of the tickets queued ahead of this one, read once on demand.
  -- More than SCAN ahead: every unit counts as taken (conservative).
  local ahead, all_taken
  local function barred(u)
    if not ahead then
      local hi = member and ('(' .. member) or ('(' .. queue .. '\1')
      local ms = redis.call('ZRANGEBYLEX', K_Q, '[' .. queue .. '\0', hi, 'LIMIT', 0, SCAN + 1)
      ahead = {}
      if #ms > SCAN then
        all_taken = true
      else
        local skip = #queue + 18
        for _, m in ipairs(ms) do
          local rec = redis.call('HGET', K_TIX, string.sub(m, skip))
          if rec then
            ahead[#ahead + 1] = rec
          end
        end
      end
    end
    if all_taken then
      return true
    end
    local needle = '\30' .. u .. '\30'
    for _, rec in ipairs(ahead) do
      if string.find(rec, needle, 1, true) then
        return true
      end
    end
    return false
  end

  -- One HMGET for every candidate's unit state: a call costs more than
  -- its fields, and nothing changes before the loop grants and returns.
  local fields = {}
  for i = 0, n - 1 do
    local u = ARGV[7 + i * 6]
    fields[#fields + 1] = u .. '\0n'
    fields[#fields + 1] = u .. '\0until'
    fields[#fields + 1] = u .. '\0probe'
    fields[#fields + 1] = u .. '\0cap'
  end
  local state = redis.call('HMGET', K_UNIT, unpack(fields))
  local caps = {}
  for i = 0, n - 1 do
    local cap = ARGV[9 + i * 6]
    if tonumber(state[i * 4 + 4]) ~= tonumber(cap) then
      caps[#caps + 1] = fields[i * 4 + 4]
      caps[#caps + 1] = cap
    end
  end
  if #caps > 0 then
    redis.call('HSET', K_UNIT, unpack(caps)) -- the last cap seen, for the Inspector and wake-ups
  end

  local retry = 0
  for i = 0, n - 1 do
    local b = 7 + i * 6
    local u, c = ARGV[b], ARGV[b + 1]
    local cap, ccap = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
    local inflight, untl = tonumber(state[i * 4 + 1]) or 0, tonumber(state[i * 4 + 2]) or 0
    local ok, probe = true, false
    if untl ~= 0 then
      if now < untl then
        ok = false
        if retry == 0 or untl < retry then
          retry = untl
        end
      elseif state[i * 4 + 3] then
        ok = false -- cooldown over, but the single probe is out
      else
        probe = true
      end
    end
    if ok and cap > 0 and inflight >= cap then
      ok = false
    end
    if ok and ccap > 0 and (tonumber(redis.call('HGET', K_CRED, c)) or 0) >= ccap then
      ok = false
    end
    if ok and not barred(u) then
      local expires = now + ttl
      local p = probe and 1 or 0
      redis.call('ZADD', K_EXP, expires, ticket)
      redis.call('HSET', K_LEASE, ticket, u .. '\31' .. c .. '\31' .. i .. '\31' .. p .. '\31' .. ARGV[b + 4] .. '\31' .. ARGV[b + 5])
      redis.call('HINCRBY', K_UNIT, u .. '\0n', 1)
      redis.call('HINCRBY', K_CRED, c, 1)
      if probe then
        redis.call('HSET', K_UNIT, u .. '\0probe', ticket)
      end
      if qrec then
        dequeue(ticket)
        -- Several waiters may have been woken for several free slots and
        -- raced: a later one was barred by this one. With room left, wake
        -- the next in line now, or that slot would sit idle until some
        -- unrelated release.
        wake(u, free_slots(u, now), ARGV[5])
      end
      return {1, i, expires, p}
    end
  end

  if qrec then
    redis.call('ZADD', K_SEEN, now + ttl, ticket) -- still waiting: not a dead waiter
  else
    member = queue .. '\0' .. string.format('%016d', redis.call('INCR', K_SEQ)) .. ticket
    local units, set = {}, {}
    for i = 0, n - 1 do
      local u = ARGV[7 + i * 6]
      if not set[u] then
        set[u] = true
        units[#units + 1] = u
      end
    end
    redis.call('ZADD', K_Q, 0, member)
    redis.call('HSET', K_TIX, ticket, queue .. '\31' .. member .. '\31' .. replica .. '\31\30' .. table.concat(units, '\30') .. '\30')
    redis.call('ZADD', K_SEEN, now + ttl, ticket)
    for _, u in ipairs(units) do
      redis.call('HINCRBY', K_UNIT, u .. '\0w', 1)
      if redis.call('HINCRBY', K_UNIT, u .. '\0q\0' .. queue, 1) == 1 then
        redis.call('ZADD', K_UQ, 0, u .. '\0' .. queue)
      end
    end
  end
  return {0, redis.call('ZLEXCOUNT', K_Q, '[' .. queue .. '\0', '(' .. member), retry}
end

local result = decide()
wake_all(reaped, now, ARGV[5]) -- after the decision, which may have used the room
return result
