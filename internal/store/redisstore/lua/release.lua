-- release: drop the lease once, apply the outcome to its unit, wake waiters.
-- ARGV: lease, rate_limited (0/1), retry_after_ms, success (0/1), wake prefix,
-- tokens used (0 = not measured: the TPM and daily reservations stand),
-- the limit a rate limit is scoped to ('' = the unit; see store.Outcome.Cool).
-- Returns {released (0/1), wakes published}.
local now = now_ms()
local prefix = ARGV[5]
local rec = redis.call('HGET', K_LEASE, ARGV[1])
local u = rec and string.match(rec, '^[^\31]*')
-- One read for the reap gate and all the unit state the outcome and the
-- wake-up need: a call costs more than its fields.
local fields = {F_REAP}
if u then
  for _, f in ipairs(unit_fields(u, RELEASE_ATTRS)) do
    fields[#fields + 1] = f
  end
end
local av = redis.call('HMGET', K_UNIT, unpack(fields))
local reaped, ran = reap(now, av[1])
wake_all(reaped, now, prefix)
if ran then -- rare: the reap may have dropped this lease, or changed its unit
  if not live_lease(ARGV[1], now) then
    return {0, 0}
  end
  rec = redis.call('HGET', K_LEASE, ARGV[1])
  av = redis.call('HMGET', K_UNIT, unpack(fields))
end
if not rec then
  return {0, 0} -- already released, expired or unknown: never count twice
end
local limited, success = ARGV[2] == '1', ARGV[4] == '1'
-- scoped: the rate limit cools the limit ARGV[7] of the lease, not its unit.
local scoped = false
if limited and ARGV[7] ~= '' and ARGV[7] ~= u then
  scoped = string.find(rec, '\30' .. ARGV[7] .. '\0', 1, true) or string.find(rec, '\31' .. ARGV[7] .. '\0', 1, true)
end
local l = drop_lease(ARGV[1], rec, tonumber(av[2]) or 0)
if limited then
  -- Scoped or not, the unit's recent 429 rate is no longer zero: its
  -- background pauses (acquire's pause_ms).
  redis.call('HSET', K_UNIT, u .. '\0l429', now)
end
-- Hidden-cap AIMD, as memstore's unit.learn: a rate limit with others in
-- flight (k >= 2) lowers ecap to k-1 (only below Cap, never raising it) and
-- restarts the success count at -(k-1), since the calls still in flight
-- started before the lesson; then ten rounds of the cap per step, a
-- hundred before retrying the concurrency last rate limited (etop); ecap is
-- dropped once it reaches Cap, or with Cap 0 once it exceeds etop.
do
  -- k: the unit's in flight, this lease included (what ran when it ended).
  local k, cap, ecap = tonumber(av[2]) or 0, tonumber(av[3]) or 0, tonumber(av[4]) or 0
  local top = tonumber(av[6]) or 0
  if limited and not scoped then
    if k >= 2 then
      local e = k - 1
      if (cap <= 0 or e < cap) and (ecap <= 0 or e < ecap) then
        ecap, top = e, k
        redis.call('HSET', K_UNIT, u .. '\0ecap', itoa(e), u .. '\0etop', itoa(k))
      end
      if ecap > 0 then
        redis.call('HSET', K_UNIT, u .. '\0es', itoa(-(k - 1)))
      end
    end
  elseif success and ecap > 0 then
    local es = (tonumber(av[5]) or 0) + 1
    local need = ecap * 10
    if ecap + 1 >= top then
      need = ecap * 100
    end
    if es < need then
      redis.call('HSET', K_UNIT, u .. '\0es', itoa(es))
    else
      ecap = ecap + 1
      redis.call('HDEL', K_UNIT, u .. '\0es')
      if (cap > 0 and ecap >= cap) or (cap <= 0 and ecap > top) then
        redis.call('HDEL', K_UNIT, u .. '\0ecap', u .. '\0etop')
      else
        redis.call('HSET', K_UNIT, u .. '\0ecap', itoa(ecap))
      end
    end
  end
end
-- Correct the TPM windows and daily counts of the unit and every limit
-- from the lease's reservations to the tokens used; a limit not cooling
-- may let its waiters in at once.
local used = tonumber(ARGV[6]) or 0
local sent = 0
for i, h in ipairs(lease_holds(l)) do
  correct(h, used, now)
  if i > 1 then
    local cool = scoped and h[1] == ARGV[7]
    local v = redis.call('HMGET', K_UNIT, h[1] .. '\0until', h[1] .. '\0level', h[1] .. '\0w0', h[1] .. '\0w1', h[1] .. '\0w2')
    if not settle(h[1], h[6], h[7], h[8], now, cool, cool and tonumber(ARGV[3]) or 0, success, v) and waiting(v[3], v[4], v[5]) then
      sent = sent + wake(h[1], now, prefix)
    end
  end
end
if apply(l, now, limited and not scoped, tonumber(ARGV[3]), success, {av[7], av[8]}) or not waiting(av[9], av[10], av[11]) then
  return {1, sent} -- the unit is cooling, or nobody waits for it: a wake-up could not be granted
end
return {1, sent + wake(u, now, prefix)}
