-- Shared by every capacity function. KEYS (all tagged {d:<domain>}, so one slot):
--   1 lease  HASH  lease id -> "unit\31cred\31index\31probe\31base_ms\31max_ms
--                  \31tokens\31tpm\31daily\31day\31limits" (tokens reserved
--                  against tpm, daily tokens reserved on UTC day `day`;
--                  limits: "\30"-joined "id\0tokens\0tpm\0daily\0day\0base_ms
--                  \0max_ms\0probe", the further units the lease holds a
--                  slot in, with the cooldown of a rate limit scoped to one
--                  and whether the lease is its post-cooldown probe)
--   2 exp    ZSET  lease id -> expiry (Redis ms)
--   3 gen    STRING the generation of the domain's state: the Redis time
--                  (µs) it was made at; a new one means the state was lost
--   4 unit   HASH  "<unit>\0<attr>": n (in flight), cap, until, level, probe,
--                  r1, r2 (slots reserved from classes 1 and 2: Reserve[0],
--                  Reserve[0]+Reserve[1]; absent = 0), w0, w1, w2 (waiting,
--                  by class), q\0<queue> (waiting in that queue), rtat,
--                  ttat (GCRA TATs of the RPM and TPM windows, Redis ms),
--                  ecap, es, etop (hidden-cap AIMD: effective cap, successes
--                  since its last change, in flight when last lowered),
--                  dday, dused (the UTC day and its tokens reserved and
--                  used, against DailyTokens), qday, qn (the UTC day and
--                  its grants, against DailyRequests; never given back);
--                  and one field of the
--                  domain, "\0reap" (see F_REAP)
--   5 cred   HASH  credential id -> in flight
--   6 q      ZSET  score 0, "<queue>\0<class digit><tag %020d><seq %016d>
--                  <ticket>": lex order is (class, WFQ tag, arrival) per queue
--   7 tix    HASH  ticket -> "queue\31member\31replica\31\30unit\30unit\30
--                  \31tenant\31arrived" (arrived: Redis ms when queued;
--                  absent in records written before it was added)
--   8 seen   ZSET  ticket -> last Acquire + LeaseTTL (dead-waiter deadline)
--   9 uq     ZSET  score 0, "<unit>\0<queue>": the queues that list a unit
--  10 seq    STRING arrival counter
--  11 fair   HASH  WFQ state: "<queue>\0<class>" -> "V\31n" (virtual time,
--                  tickets queued in the class), "<queue>\0<class>\0<tenant>"
--                  -> "F\31n" (the tenant's last finish tag, its tickets
--                  queued in the class); a field goes at n = 0
--  12 lapse  ZSET  limit id -> when its windows and day lapse (Redis ms):
--                  limits with no lease, whose state is then forgotten
-- Dynamic names (units, credentials, queues, tickets) live in fields and
-- members, never in key names, so every key is declared and the scripts
-- stay Redis Cluster safe.
-- The library (see scripts.go) is loaded once; every call binds the keys
-- of its domain first (see bind).
local K_LEASE, K_EXP, K_GEN, K_UNIT, K_CRED, K_Q, K_TIX, K_SEEN, K_UQ, K_SEQ, K_FAIR, K_LAPSE

-- REAP bounds the work of one call; the rest is reaped by the next calls.
local REAP = 64
-- SCAN bounds how many queued tickets one decision looks at.
local SCAN = 64
-- QUEUES bounds how many queues one wake-up looks at for a unit.
local QUEUES = 16
-- WAKES bounds the wake-ups one queue gets from one release.
local WAKES = 4
-- F_REAP is the field of K_UNIT holding a time (Redis ms) before which
-- nothing in K_EXP, K_SEEN or K_LAPSE is due: the calls before it skip
-- reaping (four range reads) for one field, which acquire and release read
-- with the unit's state. Absent, it means "reap now". Every score added to
-- those sets goes through due(), which lowers it; reap recomputes it.
-- REAP_IDLE bounds how far ahead it is set, so that even a wrong field
-- delays reaping by no more than that.
local F_REAP, REAP_IDLE = '\0reap', 60000
-- reap_at is F_REAP as this call knows it (see read_reap and reap).
local reap_at = 0

-- bind starts a call of a capacity function: its domain's keys, and
-- nothing known of F_REAP. Redis runs one function at a time, so the
-- library's state is the running call's.
local function bind(keys)
  K_LEASE, K_EXP, K_GEN, K_UNIT, K_CRED, K_Q, K_TIX, K_SEEN, K_UQ, K_SEQ, K_FAIR, K_LAPSE =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8], keys[9], keys[10], keys[11], keys[12]
  reap_at = 0
end

local function read_reap()
  reap_at = tonumber(redis.call('HGET', K_UNIT, F_REAP)) or 0
end

-- due records that a score at was added to K_EXP, K_SEEN or K_LAPSE.
local function due(at)
  if at < reap_at then
    reap_at = at
    redis.call('HSET', K_UNIT, F_REAP, string.format('%d', at))
  end
end

-- BG is the background class: it never takes a post-cooldown probe while
-- a more urgent ticket waits for the unit.
local BG = 2

-- A member of q is "<queue>\0<class digit><20-digit tag><16-digit seq>
-- <ticket>".
local function member_class(m, queue)
  return tonumber(string.sub(m, #queue + 2, #queue + 2))
end
local function member_tag(m, queue)
  return tonumber(string.sub(m, #queue + 3, #queue + 22))
end
local function member_ticket(m, queue)
  return string.sub(m, #queue + 39)
end

-- eff_cap is the cap in force: min(cap, ecap) where either is set; 0 = none.
local function eff_cap(cap, ecap)
  cap, ecap = tonumber(cap) or 0, tonumber(ecap) or 0
  if ecap <= 0 then
    return cap
  elseif cap <= 0 then
    return ecap
  end
  return math.min(cap, ecap)
end

-- A batch's calls (see batch) share one reading of the clock and of the
-- state's generation: nil outside a batch, and until first read in one.
local batch_now, batch_gen

-- test_clock is nil in the library the gateway loads. A test build of the
-- library (see export_test.go) sets it to a function returning the time
-- (ms) a test set for the bound domain, or nil for the real clock: one
-- nil check per call otherwise, no Redis call.
local test_clock

-- The Redis clock in ms: the only clock the store decides by.
local function now_ms()
  if batch_now then
    return batch_now
  end
  if test_clock then
    local ms = test_clock()
    if ms then
      return ms
    end
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function split(s, sep)
  local out, i = {}, 1
  while true do
    local j = string.find(s, sep, i, true)
    if not j then
      out[#out + 1] = string.sub(s, i)
      return out
    end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

-- The lease and ticket records (K_LEASE, K_TIX) taken apart by one
-- string.match: a third of what split costs them, field by field. A record
-- of another layout (an older gateway's) is split.
local LEASE_RECORD = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31' ..
  '([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$'
local TICKET_RECORD = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$'

local function record_fields(rec, layout)
  local f = {string.match(rec, layout)}
  if #f == 0 then
    return split(rec, '\31')
  end
  return f
end

local function lease_fields(rec)
  return record_fields(rec, LEASE_RECORD)
end

local function ticket_fields(rec)
  return record_fields(rec, TICKET_RECORD)
end

-- The attributes of a unit that acquire reads of each candidate (with its
-- windows when it has rate limits), and release of the lease's unit.
local ACQUIRE_ATTRS = {'n', 'until', 'probe', 'cap', 'r1', 'r2', 'ecap', 'w0', 'w1', 'w2'}
local ACQUIRE_WINDOW_ATTRS = {'rtat', 'ttat', 'dday', 'dused'}
do -- ACQUIRE_ATTRS, then the windows' (numeric loops: no global, ipairs included, is in scope while a library loads)
  local windows = ACQUIRE_WINDOW_ATTRS
  ACQUIRE_WINDOW_ATTRS = {}
  for i = 1, #ACQUIRE_ATTRS do
    ACQUIRE_WINDOW_ATTRS[i] = ACQUIRE_ATTRS[i]
  end
  for i = 1, #windows do
    ACQUIRE_WINDOW_ATTRS[#ACQUIRE_ATTRS + i] = windows[i]
  end
end
local RELEASE_ATTRS = {'n', 'cap', 'ecap', 'es', 'etop', 'until', 'level', 'w0', 'w1', 'w2'}

-- unit_fields returns the K_UNIT field names of attributes attrs (a list
-- made once) of unit u, made once per unit and list: joining them costs
-- twice what copying them does. The cache is emptied past FIELDS units,
-- so IDs that never recur (per end user limits) cannot grow it for ever.
local FIELDS = 4096
local fields_of, fields_n = {}, 0
local function unit_fields(u, attrs)
  local byUnit = fields_of[attrs]
  if not byUnit then
    byUnit = {}
    fields_of[attrs] = byUnit
  end
  local f = byUnit[u]
  if not f then
    if fields_n >= FIELDS then
      byUnit = {}
      fields_of, fields_n = {[attrs] = byUnit}, 0
    end
    f = {}
    for i, a in ipairs(attrs) do
      f[i] = u .. '\0' .. a
    end
    byUnit[u] = f
    fields_n = fields_n + 1
  end
  return f
end

-- itoa returns the decimal string of n, cached for the small integers
-- counters hold: Redis's Lua formats a number passed to redis.call, or
-- joined into a string, with sprintf, which costs about what a hash write
-- does (issue #16's measurements in bench/RESULTS.md).
local INTS = {}
for i = -1, 1023 do
  INTS[i] = i .. '' -- tostring is not in scope while a library loads (Redis 7.0)
end
local function itoa(n)
  return INTS[n] or n
end

-- TAG is the WFQ tag of one ticket of weight 1.
local TAG = 1000000

-- fair_tag returns the tag a new ticket of tenant with weight would get in
-- class of queue: max(V, F_tenant) + TAG / weight.
local function fair_tag(queue, class, tenant, weight)
  local fc = queue .. '\0' .. class
  local v = redis.call('HMGET', K_FAIR, fc, fc .. '\0' .. tenant)
  local start = 0
  for i = 1, 2 do
    if v[i] then
      start = math.max(start, tonumber(string.match(v[i], '^[^\31]*')))
    end
  end
  return start + math.max(1, math.floor(TAG / math.max(weight, 1)))
end

-- fair_count adds by to the count of field f of K_FAIR, setting its value
-- to val (or keeping it when val is nil); at 0 the field goes.
local function fair_count(f, by, val)
  local cur = redis.call('HGET', K_FAIR, f)
  local old, n = '0', 0
  if cur then
    local p = split(cur, '\31')
    old, n = p[1], tonumber(p[2])
  end
  n = n + by
  if n <= 0 then
    redis.call('HDEL', K_FAIR, f)
  else
    redis.call('HSET', K_FAIR, f, (val or old) .. '\31' .. n)
  end
end

-- fair_granted advances the virtual time of class of queue to tag.
local function fair_granted(queue, class, tag)
  local fc = queue .. '\0' .. class
  local cur = redis.call('HGET', K_FAIR, fc)
  if cur then
    local p = split(cur, '\31')
    if tag > tonumber(p[1]) then
      redis.call('HSET', K_FAIR, fc, string.format('%d', tag) .. '\31' .. p[2])
    end
  end
end

-- incr adds by to a counter field and deletes it at zero, so idle units
-- and credentials leave no fields behind.
local function incr(key, field, by)
  local v = redis.call('HINCRBY', key, field, itoa(by))
  if v <= 0 then
    redis.call('HDEL', key, field)
  end
  return v
end

-- DAY is a UTC day in ms.
local DAY = 86400000

-- state_gen returns the generation of the domain's state, making a new one
-- when there is none: a new domain, or one whose state was lost (Redis
-- restarted empty, or flushed). A replica that saw another generation must
-- reassert its leases before it decides anything.
local function state_gen()
  if batch_gen then
    return batch_gen
  end
  local g = redis.call('GET', K_GEN)
  if not g then
    local t = redis.call('TIME')
    g = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('SET', K_GEN, g)
  end
  local gen = tonumber(g)
  if batch_now then
    batch_gen = gen
  end
  return gen
end

-- batch runs op, a capacity function, once for each call packed in ARGV
-- (its argument count, then its arguments), all in the domain of KEYS, and
-- returns their replies in order, a call that failed its error in its
-- place. The pipeliner sends the calls of concurrent requests to one
-- domain this way: one function call, one set of keys, one clock reading.
local function run_batch(KEYS, ARGV, op)
  local out, i = {}, 1
  while i <= #ARGV do
    local n = tonumber(ARGV[i]) or 0
    local args
    if n <= 4000 then -- one allocation, within unpack's stack limit (~8,000)
      args = {unpack(ARGV, i + 1, i + n)}
    else
      args = {}
      for j = 1, n do
        args[j] = ARGV[i + j]
      end
    end
    local ok, r = pcall(op, KEYS, args)
    if not ok then
      r = {err = type(r) == 'table' and r.err or tostring(r)}
    end
    out[#out + 1] = r
    i = i + n + 1
  end
  return out
end

local function batch(KEYS, ARGV, op)
  bind(KEYS) -- the clock of a test build is the domain's: bound before it is read
  batch_now, batch_gen = nil, nil
  batch_now = now_ms()
  -- the memo must not outlive the batch, even one that fails
  local ok, out = pcall(run_batch, KEYS, ARGV, op)
  batch_now, batch_gen = nil, nil
  if not ok then
    error(out)
  end
  return out
end

-- lease_record packs a lease record (see K_LEASE); limits is the list of
-- its limit holds, each packed by limit_hold.
local function lease_record(u, cred, index, probe, base, max, tokens, tpm, daily, day, limits)
  return u .. '\31' .. cred .. '\31' .. index .. '\31' .. probe .. '\31' .. base .. '\31' .. max .. '\31' .. tokens ..
    '\31' .. tpm .. '\31' .. daily .. '\31' .. day .. '\31' .. table.concat(limits, '\30')
end

local function limit_hold(id, tokens, tpm, daily, day, base, max, probe)
  return id .. '\0' .. tokens .. '\0' .. tpm .. '\0' .. daily .. '\0' .. day .. '\0' .. base .. '\0' .. max .. '\0' .. probe
end

-- requests_today is how many requests unit u was granted in the UTC day
-- today (its qday and qn fields, against DailyRequests).
local function requests_today(u, today)
  local q = redis.call('HMGET', K_UNIT, u .. '\0qday', u .. '\0qn')
  if tonumber(q[1]) == today then
    return tonumber(q[2]) or 0
  end
  return 0
end

-- lapse_at is when limit id's windows are empty and its days (tokens,
-- requests; if it used any of them) are over: from then on its fields decide nothing.
local function lapse_at(id)
  local v = redis.call('HMGET', K_UNIT, id .. '\0rtat', id .. '\0ttat', id .. '\0dday', id .. '\0dused',
    id .. '\0qday', id .. '\0qn')
  local at = math.max(tonumber(v[1]) or 0, tonumber(v[2]) or 0)
  if (tonumber(v[4]) or 0) > 0 then
    at = math.max(at, ((tonumber(v[3]) or 0) + 1) * DAY)
  end
  if (tonumber(v[6]) or 0) > 0 then
    at = math.max(at, ((tonumber(v[5]) or 0) + 1) * DAY)
  end
  return math.ceil(at)
end

-- FORGET bounds the limits one call forgets; LAPSE_RECHECK is how long a
-- limit with waiters but no lease waits before it is looked at again.
local FORGET, LAPSE_RECHECK = 16, 60000

-- forget drops the state of the limits in K_LAPSE that are due, at most
-- FORGET (only from reap, which recomputes F_REAP after it): a limit with no lease, no waiter and lapsed windows is as good as
-- new, so per-end-user limits do not keep a field for every user ever seen.
-- A limit that holds a lease again leaves K_LAPSE (drop_lease puts it back
-- when its last lease goes); one that is waited for, or whose windows moved
-- on, is looked at again later.
local function forget(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_LAPSE, '-inf', now, 'LIMIT', 0, FORGET)) do
    local v = redis.call('HMGET', K_UNIT, id .. '\0n', id .. '\0w0', id .. '\0w1', id .. '\0w2')
    local at = lapse_at(id)
    if v[1] then
      redis.call('ZREM', K_LAPSE, id)
    elseif v[2] or v[3] or v[4] then
      redis.call('ZADD', K_LAPSE, math.max(at, now + LAPSE_RECHECK), id)
    elseif at > now then
      redis.call('ZADD', K_LAPSE, at, id)
    else
      redis.call('ZREM', K_LAPSE, id)
      redis.call('HDEL', K_UNIT, id .. '\0cap', id .. '\0rtat', id .. '\0ttat', id .. '\0dday', id .. '\0dused',
        id .. '\0qday', id .. '\0qn')
    end
  end
end

-- lease_holds returns the slots a parsed lease record holds: its unit,
-- then its limits, each {id, tokens, tpm, daily, day, base_ms, max_ms,
-- probe (true when the lease is the hold's probe)}.
local function lease_holds(l)
  local out = {{l[1], tonumber(l[7]) or 0, tonumber(l[8]) or 0, tonumber(l[9]) or 0, tonumber(l[10]) or 0,
    tonumber(l[5]) or 0, tonumber(l[6]) or 0, l[4] == '1'}}
  for e in string.gmatch(l[11] or '', '[^\30]+') do
    local f = split(e, '\0')
    out[#out + 1] = {f[1], tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5]), tonumber(f[6]) or 0,
      tonumber(f[7]) or 0, f[8] == '1'}
  end
  return out
end

-- correct moves a hold's TPM window from its reservation to used tokens
-- (back, never before now, or forward), and its daily count likewise when
-- it was reserved today (never below 0).
local function correct(h, used, now)
  if used <= 0 then
    return
  end
  local u, reserved, tpm, daily, day = h[1], h[2], h[3], h[4], h[5]
  if tpm > 0 then
    local f = u .. '\0ttat'
    local tat = (tonumber(redis.call('HGET', K_UNIT, f)) or 0) + (used - reserved) * 60000 / tpm
    redis.call('HSET', K_UNIT, f, string.format('%.3f', math.max(tat, now)))
  end
  if day > 0 and math.floor(now / DAY) == day then
    local v = redis.call('HMGET', K_UNIT, u .. '\0dday', u .. '\0dused')
    if tonumber(v[1]) == day then
      redis.call('HSET', K_UNIT, u .. '\0dused', math.max(0, (tonumber(v[2]) or 0) + used - daily))
    end
  end
end

-- drop_lease removes a lease and its counts; it returns the parsed record
-- (unit, cred, index, probe, base, max, tokens, tpm, daily, day, limits)
-- or nil when there was none. A caller that read the lease's record, and
-- its unit's in-flight count n, in this call passes them to save the reads.
local function drop_lease(id, rec, n)
  redis.call('ZREM', K_EXP, id)
  rec = rec or redis.call('HGET', K_LEASE, id)
  if not rec then
    return nil
  end
  redis.call('HDEL', K_LEASE, id)
  local l = lease_fields(rec)
  if not n then
    incr(K_UNIT, l[1] .. '\0n', -1)
  elseif n <= 1 then
    redis.call('HDEL', K_UNIT, l[1] .. '\0n')
  else
    redis.call('HSET', K_UNIT, l[1] .. '\0n', itoa(n - 1))
  end
  local lease = id
  for e in string.gmatch(l[11] or '', '[^\30]+') do
    local f = split(e, '\0')
    local id = f[1]
    if incr(K_UNIT, id .. '\0n', -1) <= 0 then
      local at = lapse_at(id)
      redis.call('ZADD', K_LAPSE, at, id)
      due(at)
    end
    if f[8] == '1' and redis.call('HGET', K_UNIT, id .. '\0probe') == lease then
      redis.call('HDEL', K_UNIT, id .. '\0probe')
    end
  end
  incr(K_CRED, l[2], -1)
  -- Losing the probe (released or expired) frees the probe slot.
  if l[4] == '1' and redis.call('HGET', K_UNIT, l[1] .. '\0probe') == lease then
    redis.call('HDEL', K_UNIT, l[1] .. '\0probe')
  end
  return l
end

-- dequeue removes a ticket from its queue and the waiting counts; it
-- returns the parsed record (queue, member, replica, units) or nil.
local function dequeue(t)
  redis.call('ZREM', K_SEEN, t)
  local rec = redis.call('HGET', K_TIX, t)
  if not rec then
    return nil
  end
  redis.call('HDEL', K_TIX, t)
  local r = ticket_fields(rec)
  redis.call('ZREM', K_Q, r[2])
  local class = member_class(r[2], r[1])
  local fc = r[1] .. '\0' .. class
  fair_count(fc, -1)
  fair_count(fc .. '\0' .. (r[5] or ''), -1)
  local wc = '\0w' .. class
  for u in string.gmatch(r[4], '[^\30]+') do
    incr(K_UNIT, u .. wc, -1)
    if incr(K_UNIT, u .. '\0q\0' .. r[1], -1) <= 0 then
      redis.call('ZREM', K_UQ, u .. '\0' .. r[1])
    end
  end
  return r
end

-- REAPED bounds how many units reaping may wake waiters for in one call.
local REAPED = 8

-- reap drops expired leases and dead waiters, at most REAP of each, when
-- F_REAP is due (at: its value when the caller read it; nil reads it). It
-- returns the units (at most REAPED) that may now have room for a waiter:
-- a crashed holder's slot or a dead head's place, which no release will
-- announce; and whether it ran, i.e. whether state read before may have
-- changed.
local function reap(now, at)
  if at == nil then
    read_reap()
  else
    reap_at = tonumber(at) or 0
  end
  if now < reap_at then
    return {}, false
  end
  forget(now)
  local units, set = {}, {}
  local function note(u)
    if #units < REAPED and not set[u] then
      set[u] = true
      units[#units + 1] = u
    end
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_EXP, '-inf', now, 'LIMIT', 0, REAP)) do
    local l = drop_lease(id)
    if l then
      for _, h in ipairs(lease_holds(l)) do
        note(h[1])
      end
    end
  end
  for _, t in ipairs(redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', now, 'LIMIT', 0, REAP)) do
    local r = dequeue(t)
    if r then
      for u in string.gmatch(r[4], '[^\30]+') do
        note(u)
      end
    end
  end
  -- The next due score; at or before now when a bound left some behind.
  local next = now + REAP_IDLE
  for _, k in ipairs({K_EXP, K_SEEN, K_LAPSE}) do
    local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    if first[2] then
      next = math.min(next, math.floor(tonumber(first[2])))
    end
  end
  reap_at = next
  redis.call('HSET', K_UNIT, F_REAP, string.format('%d', next))
  return units, true
end

-- live_lease returns the expiry of a lease that is still live; a lease past
-- its expiry that the bounded reap missed is dropped here. (Before F_REAP,
-- every lease in K_LEASE is live.)
local function live_lease(id, now)
  local s = redis.call('ZSCORE', K_EXP, id)
  if not s then
    return nil
  end
  s = tonumber(s)
  if s <= now then
    drop_lease(id)
    return nil
  end
  return s
end

-- waiting reports whether any ticket waits for a unit, given its w0, w1
-- and w2 fields: if none does, no wake-up or no-barging check can find one.
local function waiting(w0, w1, w2)
  return (tonumber(w0) or 0) + (tonumber(w1) or 0) + (tonumber(w2) or 0) > 0
end

-- urgent_waiting reports whether a ticket of a class more urgent than
-- background waits for unit u (in any queue).
local function urgent_waiting(u)
  local v = redis.call('HMGET', K_UNIT, u .. '\0w0', u .. '\0w1')
  return (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) > 0
end

-- rooms returns how many waiters of each class (index class + 1) unit u
-- could take now, at most WAKES each: none while cooling or while its probe
-- is out; in probe mode one, but none for background while a more urgent
-- ticket waits; and never more than Cap less the in-flight count and the
-- slots reserved for more urgent classes. Room never grows with the class.
local function rooms(u, now)
  local v = redis.call('HMGET', K_UNIT, u .. '\0n', u .. '\0cap', u .. '\0until', u .. '\0probe',
    u .. '\0r1', u .. '\0r2', u .. '\0w0', u .. '\0w1', u .. '\0ecap')
  local n, cap, untl = tonumber(v[1]) or 0, eff_cap(v[2], v[9]), tonumber(v[3]) or 0
  local res = {0, tonumber(v[5]) or 0, tonumber(v[6]) or 0}
  local out = {WAKES, WAKES, WAKES}
  if untl ~= 0 then
    if now < untl or v[4] then
      return {0, 0, 0}
    end
    out = {1, 1, 1}
    if (tonumber(v[7]) or 0) + (tonumber(v[8]) or 0) > 0 then
      out[BG + 1] = 0
    end
  end
  if cap > 0 then
    for c = 1, 3 do
      out[c] = math.max(0, math.min(out[c], cap - res[c] - n))
    end
  end
  return out
end

-- wake publishes, for each queue listing unit u, the first tickets in
-- (class, tag, arrival) order that list u, on their replica's channel: as many
-- as u has room for given their class (see rooms), and at most limit
-- (default WAKES) per queue. It is a hint: a waiter that misses it retries
-- at RetryAt or on its safety tick.
local function wake(u, now, prefix, limit)
  limit = limit or WAKES
  local room = rooms(u, now)
  if math.min(room[1], limit) <= 0 then
    return 0 -- class 0 has the most room
  end
  local sent = 0
  local needle = '\30' .. u .. '\30'
  for _, m in ipairs(redis.call('ZRANGEBYLEX', K_UQ, '[' .. u .. '\0', '(' .. u .. '\1', 'LIMIT', 0, QUEUES)) do
    local queue = string.sub(m, #u + 2)
    local n = 0
    for _, mem in ipairs(redis.call('ZRANGEBYLEX', K_Q, '[' .. queue .. '\0', '(' .. queue .. '\1', 'LIMIT', 0, SCAN)) do
      -- Later members are of the same class or a less urgent one, with no
      -- more room: once this one's class is full, the queue is done.
      if n >= math.min(room[member_class(mem, queue) + 1], limit) then
        break
      end
      local t = member_ticket(mem, queue)
      local rec = redis.call('HGET', K_TIX, t)
      if rec and string.find(rec, needle, 1, true) then
        redis.call('PUBLISH', prefix .. ticket_fields(rec)[3], t)
        n = n + 1
      end
    end
    sent = sent + n
  end
  return sent
end

-- wake_all wakes, for each unit in units, as many waiters as it has room
-- for. With no wake prefix (a read-only caller) it does nothing.
local function wake_all(units, now, prefix)
  if not prefix or prefix == '' then
    return
  end
  for _, u in ipairs(units) do
    wake(u, now, prefix)
  end
end

-- leave dequeues ticket t and, as it may have been the head that barred
-- the others from a free unit, wakes one waiter of each of its first
-- units. It returns whether t was queued.
local function leave(t, now, prefix)
  local r = dequeue(t)
  if not r then
    return false
  end
  local budget = 8
  for u in string.gmatch(r[4], '[^\30]+') do
    wake(u, now, prefix, 1)
    budget = budget - 1
    if budget == 0 then
      break
    end
  end
  return true
end
