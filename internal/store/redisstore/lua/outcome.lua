-- settle runs the cooldown state machine of unit u (or a limit) for a
-- released lease that held a slot in it (with the unit's cooldown base and
-- max; probe: the lease was its probe) and reports whether u is now cooling.
-- v is u's until and level fields when the caller read them in this call.
local function settle(u, base, max, probe, now, limited, retry_after, success, v)
  local fu, fl = u .. '\0until', u .. '\0level'
  v = v or redis.call('HMGET', K_UNIT, fu, fl)
  local untl, level = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  if limited then
    local d = retry_after
    if d <= 0 then
      if base <= 0 then
        base = 1000
      end
      d = base * 2 ^ math.min(level, 40) -- the exponent bound keeps d finite
    end
    if max > 0 and d > max then
      d = max
    end
    if now + d > untl then
      -- cooled sums the cooldowns set (store.UnitState.Cooled): the part
      -- of this one not already counted.
      redis.call('HINCRBY', K_UNIT, u .. '\0cooled', string.format('%d', now + d - math.max(untl, now)))
      untl = now + d
    end
    redis.call('HSET', K_UNIT, fu, string.format('%d', untl), fl, itoa(level + 1))
    return true
  end
  if success then
    if v[2] then
      redis.call('HDEL', K_UNIT, fl)
    end
    if probe or (untl ~= 0 and now >= untl) then
      redis.call('HDEL', K_UNIT, fu, u .. '\0probe') -- the probe worked: open
      untl = 0
    end
  end
  -- drop_lease already freed the probe slot of a probe that failed otherwise.
  return untl ~= 0 and now < untl
end

-- apply runs settle for the unit of a released lease l (see drop_lease).
local function apply(l, now, limited, retry_after, success, v)
  return settle(l[1], tonumber(l[5]), tonumber(l[6]), l[4] == '1', now, limited, retry_after, success, v)
end
