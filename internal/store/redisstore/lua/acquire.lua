-- acquire: grant the first eligible candidate, else queue the ticket.
-- ARGV: ticket, queue, replica, ttl_ms, wake prefix, class, n, tokens,
-- tenant, weight, the state generation the replica knows (0 = none yet), then
-- n × (unit, cred, cap, cred_cap, base_ms, max_ms, res1, res2, rpm, tpm,
-- daily, lstart, lcount, pause_ms, dreq), where resC is the number of the unit's slots class C may not use
-- (Reserve[0], then Reserve[0] + Reserve[1]), rpm, tpm and daily the unit's
-- limits (0 = none), tokens the estimate reserved against tpm and daily,
-- and lstart, lcount the candidate's limits: the limits section's entries
-- lstart (0-based) through lstart + lcount - 1, and pause_ms the unit's
-- background pause after a rate limit (0 = none), dreq its daily requests
-- (0 = none); then the limits, each (id, cap, rpm, tpm, daily, refuse,
-- base_ms, max_ms, dreq), refuse 1 for a limit never waited for, base and
-- max its cooldown (store.Outcome.Cool).
-- Returns {1, index, expires_ms, probe, gen} or {0, position, retry_at_ms,
-- cooling, gen} (cooling 1 when every candidate's unit, or a limit of its
-- with a cooldown, is closed by one), {3, gen} when a refuse limit is full (the ticket is not
-- queued), or {2, gen} when the replica knows another generation: the
-- state was lost, and nothing is decided until it reasserts its leases.
local gen = state_gen()
local known = tonumber(ARGV[11])
if known ~= 0 and known ~= gen then
  return {2, gen}
end
local now = now_ms()
local ticket, queue, replica = ARGV[1], ARGV[2], ARGV[3]
local ttl, class, n, tokens = tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local tenant, weight = ARGV[9], tonumber(ARGV[10])
local A, W = 12, 15 -- the first candidate's ARGV index, and the ARGV per candidate
local L, LW = A + n * W, 9 -- the first limit's ARGV index, and the ARGV per limit

-- The reap gate and every candidate's unit state, in one HMGET: a call
-- costs more than its fields, and nothing changes before the loop of
-- decide grants and returns. state[off[i] + j] is field j of
-- ACQUIRE_ATTRS of candidate i (0-based), or of ACQUIRE_WINDOW_ATTRS for
-- a unit with rate limits.
local fields, off = {F_REAP}, {}
for i = 0, n - 1 do
  local b = A + i * W
  local u = ARGV[b]
  off[i] = #fields
  local attrs = ACQUIRE_ATTRS
  if tonumber(ARGV[b + 8]) > 0 or tonumber(ARGV[b + 9]) > 0 or tonumber(ARGV[b + 10]) > 0 then
    attrs = ACQUIRE_WINDOW_ATTRS
  end
  for _, f in ipairs(unit_fields(u, attrs)) do
    fields[#fields + 1] = f
  end
end
-- read_state HMGETs fields in chunks below Lua's unpack limit (~8,000).
local function read_state()
  if #fields <= 4000 then
    return redis.call('HMGET', K_UNIT, unpack(fields))
  end
  local out = {}
  for i = 1, #fields, 4000 do
    for _, v in ipairs(redis.call('HMGET', K_UNIT, unpack(fields, i, math.min(i + 3999, #fields)))) do
      out[#out + 1] = v
    end
  end
  return out
end
local state = read_state()
local reaped, ran = reap(now, state[1])
if ran then -- rare: the reap may have changed what was read
  state = read_state()
end

-- gcra returns the new TAT (Redis ms) of a grant of cost under limit per
-- WINDOW, and whether it passes: the new TAT is at most now + WINDOW (the
-- burst tolerance). A cost above limit counts as limit, so it passes when
-- the window is empty.
local WINDOW = 60000
local function gcra(tat, limit, cost)
  cost = math.max(0, math.min(cost, limit))
  local new = math.max(tat, now) + cost * WINDOW / limit
  return new, new - now <= WINDOW
end

-- rate checks the RPM, TPM, daily tokens and daily requests limits of
-- unit u (v: its rtat, ttat, dday and dused fields; its qday and qn are
-- read here, only for a unit with dreq) for one request of tokens. It
-- returns whether they pass, the earliest time they would (when not), and
-- the new values {rtat, ttat, dused, day, reserved tpm tokens, reserved
-- daily tokens, grants today}.
local today = math.floor(now / DAY)
local function rate(u, v, rpm, tpm, daily, dreq)
  local pass, ok, at = true, true, 0
  local r = {false, false, false, 0, 0, 0, false}
  if rpm > 0 then
    r[1], pass = gcra(tonumber(v[1]) or 0, rpm, 1)
    if not pass then
      ok, at = false, r[1] - WINDOW
    end
  end
  if tpm > 0 then
    r[2], pass = gcra(tonumber(v[2]) or 0, tpm, tokens)
    if not pass then
      ok, at = false, math.max(at, r[2] - WINDOW)
    end
    r[5] = math.max(0, math.min(tokens, tpm))
  end
  if daily > 0 then
    local used = 0
    if tonumber(v[3]) == today then
      used = tonumber(v[4]) or 0
    end
    r[6] = math.max(0, math.min(tokens, daily))
    r[3], r[4] = used + r[6], today
    if r[3] > daily then
      ok, at = false, math.max(at, (today + 1) * DAY)
    end
  end
  if dreq > 0 then
    local granted = requests_today(u, today)
    r[7] = granted + 1 -- counted at the grant, never given back
    if granted >= dreq then
      ok, at = false, math.max(at, (today + 1) * DAY)
    end
  end
  return ok, math.ceil(at), r
end

-- keep appends to set, a list of HSET field-value pairs, the new window
-- values r (see rate) of unit u, so one HSET writes them with the rest.
local function keep(set, u, r)
  local function add(f, v)
    set[#set + 1] = u .. '\0' .. f
    set[#set + 1] = v
  end
  if r[1] then
    add('rtat', string.format('%.3f', r[1]))
  end
  if r[2] then
    add('ttat', string.format('%.3f', r[2]))
  end
  if r[3] then
    add('dday', r[4])
    add('dused', r[3])
  end
  if r[7] then
    add('qday', today)
    add('qn', r[7])
  end
  return set
end

-- limit_cooling reports whether a limit with a cooldown (base_ms > 0) of
-- the candidate at ARGV index b is closed by one: cooling, or its probe out.
local function limit_cooling(b)
  for j = 0, tonumber(ARGV[b + 12]) - 1 do
    local x = L + (tonumber(ARGV[b + 11]) + j) * LW
    if tonumber(ARGV[x + 6]) > 0 then
      local v = redis.call('HMGET', K_UNIT, ARGV[x] .. '\0until', ARGV[x] .. '\0probe')
      local lu = tonumber(v[1]) or 0
      if lu ~= 0 and (now < lu or v[2]) then
        return true
      end
    end
  end
  return false
end

local function decide()
  -- A retried call (or a go-redis retry after a timeout) gets the same grant.
  local lrec = redis.call('HGET', K_LEASE, ticket)
  local held = lrec and live_lease(ticket, now)
  if held then
    local l = lease_fields(lrec)
    local p = 0
    for _, h in ipairs(lease_holds(l)) do
      if h[8] then
        p = 1 -- the probe of its unit or of a limit
      end
    end
    return {1, tonumber(l[3]), held, p, gen}
  end

  local qrec = redis.call('HGET', K_TIX, ticket)
  local member, tag
  if qrec then
    local r = ticket_fields(qrec)
    queue, member = r[1], r[2]
    class = member_class(member, queue) -- a queued ticket keeps its class and tag
    tag = member_tag(member, queue)
  end
  -- where a new ticket would queue, read only when needed
  local function my_tag()
    tag = tag or fair_tag(queue, class, tenant, weight)
    return tag
  end

  -- A full refuse limit is never waited for: the ticket leaves instead.
  for x = L, #ARGV, LW do
    local lcap = tonumber(ARGV[x + 1])
    if ARGV[x + 5] == '1' and lcap > 0 and (tonumber(redis.call('HGET', K_UNIT, ARGV[x] .. '\0n')) or 0) >= lcap then
      leave(ticket, now, ARGV[5])
      return {3, gen}
    end
  end

  -- Records of the tickets queued ahead of this one in (class, tag,
  -- arrival) order, read once on demand: a newcomer is behind every ticket
  -- of a more urgent class and those of its class with a tag up to its
  -- own. More than SCAN ahead: every unit counts as taken (conservative).
  -- w0, w1, w2 are u's waiting counts: with none, no ticket lists u.
  local ahead, all_taken
  local function barred(u, w0, w1, w2)
    if not waiting(w0, w1, w2) then
      return false
    end
    if not ahead then
      local hi = member and ('(' .. member) or ('(' .. queue .. '\0' .. class .. string.format('%020d', my_tag() + 1))
      local ms = redis.call('ZRANGEBYLEX', K_Q, '[' .. queue .. '\0', hi, 'LIMIT', 0, SCAN + 1)
      ahead = {}
      if #ms > SCAN then
        all_taken = true
      else
        for _, m in ipairs(ms) do
          local rec = redis.call('HGET', K_TIX, member_ticket(m, queue))
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

  -- The last cap and reserves seen, for the Inspector and wake-ups; a zero
  -- reserve is stored as no field.
  local sets, dels = {}, {}
  for i = 0, n - 1 do
    local cap = ARGV[A + i * W + 2]
    local o = off[i]
    if tonumber(state[o + 4]) ~= tonumber(cap) then
      sets[#sets + 1] = fields[o + 4]
      sets[#sets + 1] = cap
      state[o + 4] = cap
    end
    for j = 5, 6 do
      local res = tonumber(ARGV[A + i * W + j + 1])
      if (tonumber(state[o + j]) or 0) ~= res then
        if res == 0 then
          dels[#dels + 1] = fields[o + j]
          state[o + j] = false
        else
          sets[#sets + 1] = fields[o + j]
          sets[#sets + 1] = res
          state[o + j] = res
        end
      end
    end
  end
  if #sets > 0 then
    redis.call('HSET', K_UNIT, unpack(sets))
  end
  if #dels > 0 then
    redis.call('HDEL', K_UNIT, unpack(dels))
  end

  local retry = 0
  for i = 0, n - 1 do
    local b, o = A + i * W, off[i]
    local u, c = ARGV[b], ARGV[b + 1]
    local cap, ccap = eff_cap(ARGV[b + 2], state[o + 7]), tonumber(ARGV[b + 3])
    local res = 0
    if class > 0 then
      res = tonumber(ARGV[b + 5 + class])
    end
    local inflight, untl = tonumber(state[o + 1]) or 0, tonumber(state[o + 2]) or 0
    local ok, probe = true, false
    if untl ~= 0 then
      if now < untl then
        ok = false
        if retry == 0 or untl < retry then
          retry = untl
        end
      elseif state[o + 3] then
        ok = false -- cooldown over, but the single probe is out
      elseif class == BG and urgent_waiting(u) then
        ok = false -- background is throttled first: a more urgent ticket probes
      else
        probe = true
      end
    end
    -- Background pauses after the unit's last rate limit (its l429 field,
    -- set by release): no release announces the end of the pause.
    local pause = tonumber(ARGV[b + 13])
    if class == BG and pause > 0 then
      local last = tonumber(redis.call('HGET', K_UNIT, u .. '\0l429')) or 0
      if now < last + pause then
        ok = false
        if retry == 0 or last + pause < retry then
          retry = last + pause
        end
      end
    end
    if ok and cap > 0 and inflight >= cap - res then
      ok = false
    end
    if ok and ccap > 0 and (tonumber(redis.call('HGET', K_CRED, c)) or 0) >= ccap then
      ok = false
    end
    -- The RPM and TPM windows (GCRA, one TAT field each) and the day.
    -- They free room without a release to announce it: a skipped waiter
    -- retries when they would pass.
    local rpm, tpm, daily, dreq = tonumber(ARGV[b + 8]), tonumber(ARGV[b + 9]), tonumber(ARGV[b + 10]),
      tonumber(ARGV[b + 14])
    local r = {false, false, false, 0, 0, 0, false}
    if ok and (rpm > 0 or tpm > 0 or daily > 0 or dreq > 0) then
      local at
      ok, at, r = rate(u, {state[o + 11], state[o + 12], state[o + 13], state[o + 14]}, rpm, tpm, daily, dreq)
      if not ok and (retry == 0 or at < retry) then
        retry = at
      end
    end
    ok = ok and not barred(u, state[o + 8], state[o + 9], state[o + 10])
    -- The candidate's limits: each must have a slot, pass its windows and
    -- day, and not be taken by no-barging. Only when none is refused for
    -- a slot (which a release announces) does RetryAt count their windows.
    local lims = {}
    if ok then
      local blocked, lat = false, 0
      for j = 0, tonumber(ARGV[b + 12]) - 1 do
        local x = L + (tonumber(ARGV[b + 11]) + j) * LW
        local id, lcap = ARGV[x], tonumber(ARGV[x + 1])
        local v = redis.call('HMGET', K_UNIT, id .. '\0n', id .. '\0cap', id .. '\0rtat', id .. '\0ttat', id .. '\0dday',
          id .. '\0dused', id .. '\0ecap', id .. '\0until', id .. '\0probe', id .. '\0w0', id .. '\0w1', id .. '\0w2')
        if (tonumber(v[2]) or 0) ~= lcap then
          redis.call('HSET', K_UNIT, id .. '\0cap', lcap)
          if redis.call('ZADD', K_LAPSE, 'NX', now, id) == 1 then -- forgotten unless it comes to hold a lease
            due(now)
          end
        end
        local ecap, luntl = eff_cap(lcap, v[7]), tonumber(v[8]) or 0
        if luntl ~= 0 and now < luntl then
          ok, lat = false, math.max(lat, luntl) -- cooling: no release announces its end
        elseif luntl ~= 0 and v[9] then
          ok, blocked = false, true -- its probe is out
        elseif ecap > 0 and (tonumber(v[1]) or 0) >= ecap then
          ok, blocked = false, true
        else
          local pass, at, lr = rate(id, {v[3], v[4], v[5], v[6]}, tonumber(ARGV[x + 2]), tonumber(ARGV[x + 3]),
            tonumber(ARGV[x + 4]), tonumber(ARGV[x + 8]))
          if not pass then
            ok, lat = false, math.max(lat, at)
          elseif barred(id, v[10], v[11], v[12]) then
            ok, blocked = false, true
          else
            lims[#lims + 1] = {id, lr, tonumber(ARGV[x + 3]), ARGV[x + 6], ARGV[x + 7], luntl ~= 0, tonumber(v[1]) or 0}
          end
        end
      end
      if not ok and not blocked and (retry == 0 or lat < retry) then
        retry = lat
      end
    end
    if ok then
      local expires = now + ttl
      local p = probe and 1 or 0
      redis.call('ZADD', K_EXP, expires, ticket)
      due(expires)
      local lrec = {}
      for _, lim in ipairs(lims) do
        local id, lr = lim[1], lim[2]
        local set = keep({id .. '\0n', itoa(lim[7] + 1)}, id, lr)
        local lp = 0
        if lim[6] then -- its cooldown is over: this is its probe
          lp = 1
          set[#set + 1] = id .. '\0probe'
          set[#set + 1] = ticket
        end
        redis.call('HSET', K_UNIT, unpack(set))
        lrec[#lrec + 1] = limit_hold(id, itoa(lr[5]), itoa(lim[3]), itoa(lr[6]), lr[3] and lr[4] or '0', lim[4], lim[5], itoa(lp))
      end
      redis.call('HSET', K_LEASE, ticket, lease_record(u, c, itoa(i), itoa(p), ARGV[b + 4], ARGV[b + 5], itoa(r[5]), ARGV[b + 9],
        itoa(r[6]), r[3] and r[4] or '0', lrec))
      for _, lim in ipairs(lims) do
        if lim[6] then
          p = 1
        end
      end
      -- The unit's in-flight count, windows and probe in one write.
      local set = keep({u .. '\0n', itoa(inflight + 1)}, u, r)
      if probe then
        set[#set + 1] = u .. '\0probe'
        set[#set + 1] = ticket
      end
      redis.call('HSET', K_UNIT, unpack(set))
      redis.call('HINCRBY', K_CRED, c, '1')
      if qrec then
        fair_granted(queue, class, tag)
        dequeue(ticket)
        -- Several waiters may have been woken for several free slots and
        -- raced: a later one was barred by this one. With room left, wake
        -- the next in line now, or that slot would sit idle until some
        -- unrelated release.
        wake(u, now, ARGV[5])
        for _, lim in ipairs(lims) do
          wake(lim[1], now, ARGV[5])
        end
      end
      return {1, i, expires, p, gen}
    end
  end

  -- Cooling: every candidate's unit, or a limit of its with a cooldown, is
  -- closed by one (not open, and its probe not free to take).
  local cooling = 1
  for i = 0, n - 1 do
    local untl = tonumber(state[off[i] + 2]) or 0
    if (untl == 0 or now >= untl and not state[off[i] + 3]) and not limit_cooling(A + i * W) then
      cooling = 0
      break
    end
  end

  if qrec then
    redis.call('ZADD', K_SEEN, now + ttl, ticket) -- still waiting: not a dead waiter
    due(now + ttl)
  else
    member = queue .. '\0' .. class .. string.format('%020d', my_tag()) .. string.format('%016d', redis.call('INCR', K_SEQ)) .. ticket
    local fc = queue .. '\0' .. class
    fair_count(fc, 1)
    fair_count(fc .. '\0' .. tenant, 1, string.format('%d', tag))
    local units, set = {}, {}
    local function note(u)
      if not set[u] then
        set[u] = true
        units[#units + 1] = u
      end
    end
    for i = 0, n - 1 do
      local b = A + i * W
      note(ARGV[b])
      for j = 0, tonumber(ARGV[b + 12]) - 1 do
        note(ARGV[L + (tonumber(ARGV[b + 11]) + j) * LW])
      end
    end
    redis.call('ZADD', K_Q, 0, member)
    redis.call('HSET', K_TIX, ticket, queue .. '\31' .. member .. '\31' .. replica .. '\31\30' .. table.concat(units, '\30') .. '\30\31' ..
      tenant .. '\31' .. now)
    redis.call('ZADD', K_SEEN, now + ttl, ticket)
    due(now + ttl)
    for _, u in ipairs(units) do
      redis.call('HINCRBY', K_UNIT, u .. '\0w' .. class, '1')
      if redis.call('HINCRBY', K_UNIT, u .. '\0q\0' .. queue, '1') == 1 then
        redis.call('ZADD', K_UQ, 0, u .. '\0' .. queue)
      end
    end
  end
  return {0, redis.call('ZLEXCOUNT', K_Q, '[' .. queue .. '\0', '(' .. member), retry, cooling, gen}
end

local result = decide()
wake_all(reaped, now, ARGV[5]) -- after the decision, which may have used the room
return result
